//! The `bit` library as LuaBitOp 1.0 defines it (what Valkey embeds):
//! every operation works on 32-bit integers and returns a signed 32-bit
//! result as a Lua number.

use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

/// LuaBitOp's number normalisation: add 2^52 + 2^51 and keep the low 32
/// bits of the double's mantissa, i.e. round to nearest and wrap modulo
/// 2^32.
pub fn tobit(n: f64) -> i32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn arg(lua: &Lua, v: &Value, i: usize, fname: &str) -> Result<i32> {
    match lua.coerce_number(v.clone())? {
        Some(n) => Ok(tobit(n)),
        None => Err(mlua::Error::runtime(format!(
            "bad argument #{i} to '{fname}' (number expected, got {})",
            if matches!(v, Value::Nil) {
                "no value"
            } else {
                v.type_name()
            }
        ))),
    }
}

fn args(lua: &Lua, a: &MultiValue, fname: &str) -> Result<Vec<i32>> {
    if a.is_empty() {
        return Err(mlua::Error::runtime(format!(
            "bad argument #1 to '{fname}' (number expected, got no value)"
        )));
    }
    a.iter()
        .enumerate()
        .map(|(i, v)| arg(lua, v, i + 1, fname))
        .collect()
}

/// The `bit` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "tobit",
        lua.create_function(|lua, a: MultiValue| Ok(f64::from(args(lua, &a, "tobit")?[0])))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|lua, a: MultiValue| Ok(f64::from(!args(lua, &a, "bnot")?[0])))?,
    )?;
    type Fold = fn(i32, i32) -> i32;
    let folds: [(&str, Fold); 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, f) in folds {
        t.set(
            name,
            lua.create_function(move |lua, a: MultiValue| {
                let v = args(lua, &a, name)?;
                Ok(f64::from(v[1..].iter().fold(v[0], |x, &y| f(x, y))))
            })?,
        )?;
    }
    type Shift = fn(i32, u32) -> i32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.set(
            name,
            lua.create_function(move |lua, a: MultiValue| {
                let x = arg(lua, a.front().unwrap_or(&Value::Nil), 1, name)?;
                let n = arg(lua, a.get(1).unwrap_or(&Value::Nil), 2, name)?;
                Ok(f64::from(f(x, (n as u32) & 31)))
            })?,
        )?;
    }
    t.set(
        "bswap",
        lua.create_function(|lua, a: MultiValue| {
            Ok(f64::from(args(lua, &a, "bswap")?[0].swap_bytes()))
        })?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|lua, a: Variadic<Value>| {
            let x = arg(lua, a.first().unwrap_or(&Value::Nil), 1, "tohex")?;
            let mut n = match a.get(1) {
                None | Some(Value::Nil) => 8,
                Some(v) => arg(lua, v, 2, "tohex")?,
            };
            let upper = n < 0;
            if upper {
                // Valkey's fix of LuaBitOp (its -n overflowed at INT_MIN,
                // giving ""): INT_MIN counts as INT_MIN + 1, i.e. 8 digits.
                n = n.max(i32::MIN + 1).wrapping_neg();
            }
            let n = n.clamp(0, 8) as usize;
            let s = if upper {
                format!("{:08X}", x as u32)
            } else {
                format!("{:08x}", x as u32)
            };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}
