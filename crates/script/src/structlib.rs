//! The `struct` library as Valkey embeds it (Roberto Ierusalimschy's
//! lua-struct 0.2): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, i])`,
//! `struct.size(fmt)`, with the sizes of a 64-bit Linux build (short 2,
//! int 4, long and size_t 8) and native little-endian order by default.

use mlua::{Lua, MultiValue, Result, Table, Value};

const MAX_INT_SIZE: usize = 32;
const MAX_ALIGN: usize = 8;

struct Header {
    big: bool,
    align: usize,
}

fn rt(msg: String) -> mlua::Error {
    mlua::Error::runtime(msg)
}

fn argerr(n: usize, fname: &str, msg: &str) -> mlua::Error {
    rt(format!("bad argument #{n} to '{fname}' ({msg})"))
}

/// Digits at `fmt[*i..]`, or `df`.
fn getnum(fmt: &[u8], i: &mut usize, df: usize) -> Result<usize> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(df);
    }
    let mut a: usize = 0;
    while let Some(d) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
        let d = usize::from(d - b'0');
        if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
            return Err(rt("integral size overflow".into()));
        }
        a = a * 10 + d;
        *i += 1;
    }
    Ok(a)
}

fn optsize(opt: u8, fmt: &[u8], i: &mut usize) -> Result<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, i, 4)?;
            if sz > MAX_INT_SIZE {
                return Err(rt(format!(
                    "integral size {sz} is larger than limit of {MAX_INT_SIZE}"
                )));
            }
            sz
        }
        _ => 0,
    })
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn control(opt: u8, fmt: &[u8], i: &mut usize, h: &mut Header, fname: &str) -> Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.big = true,
        b'<' | b'=' => h.big = false,
        b'!' => {
            let a = getnum(fmt, i, MAX_ALIGN)?;
            if !a.is_power_of_two() {
                return Err(rt(format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        c => {
            return Err(argerr(
                1,
                fname,
                &format!("invalid format option '{}'", c as char),
            ));
        }
    }
    Ok(())
}

fn check_number(lua: &Lua, a: &MultiValue, n: usize, fname: &str) -> Result<f64> {
    // pack pushes a nil mark after its arguments, so a missing one reads nil.
    let absent = if fname == "pack" { "nil" } else { "no value" };
    let v = a.get(n - 1).cloned().unwrap_or(Value::Nil);
    let missing = matches!(v, Value::Nil);
    let tn = v.type_name();
    match lua.coerce_number(v)? {
        Some(x) => Ok(x),
        None => Err(argerr(
            n,
            fname,
            &format!("number expected, got {}", if missing { absent } else { tn }),
        )),
    }
}

fn check_string(lua: &Lua, a: &MultiValue, n: usize, fname: &str) -> Result<Vec<u8>> {
    let absent = if fname == "pack" && n > 1 {
        "nil"
    } else {
        "no value"
    };
    let v = a.get(n - 1).cloned().unwrap_or(Value::Nil);
    let missing = matches!(v, Value::Nil);
    let tn = v.type_name();
    match lua.coerce_string(v)? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(argerr(
            n,
            fname,
            &format!("string expected, got {}", if missing { absent } else { tn }),
        )),
    }
}

fn put_int(out: &mut Vec<u8>, n: f64, big: bool, size: usize) {
    let mut value = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let mut buf = [0u8; MAX_INT_SIZE];
    for k in 0..size {
        let at = if big { size - 1 - k } else { k };
        buf[at] = (value & 0xff) as u8;
        value = value.checked_shr(8).unwrap_or(0);
    }
    out.extend_from_slice(&buf[..size]);
}

fn get_int(b: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = b.len();
    for k in 0..size {
        let at = if big { k } else { size - 1 - k };
        l = (l << 8) | u64::from(b[at]);
    }
    if !signed {
        return l as f64;
    }
    let shift = size * 8 - 1;
    if shift < 64 {
        let mask = u64::MAX << shift;
        if l & mask != 0 {
            l |= mask;
        }
    }
    l as i64 as f64
}

fn pack(lua: &Lua, a: MultiValue) -> Result<mlua::LuaString> {
    let fmt = check_string(lua, &a, 1, "pack")?;
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut arg = 2;
    let mut out = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        let toalign = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &a, arg, "pack")?;
                arg += 1;
                put_int(&mut out, n, h.big, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, &a, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    f.to_be_bytes()
                } else {
                    f.to_le_bytes()
                });
            }
            b'd' => {
                let d = check_number(lua, &a, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    d.to_be_bytes()
                } else {
                    d.to_le_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_string(lua, &a, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(argerr(arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(opt, &fmt, &mut i, &mut h, "pack")?,
        }
    }
    lua.create_string(out)
}

fn unpack(lua: &Lua, a: MultiValue) -> Result<MultiValue> {
    let fmt = check_string(lua, &a, 1, "unpack")?;
    let data = check_string(lua, &a, 2, "unpack")?;
    let ld = data.len();
    let mut pos = match a.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => check_number(lua, &a, 3, "unpack")? as i64,
    };
    if pos <= 0 {
        return Err(argerr(3, "unpack", "offset must be 1 or greater"));
    }
    pos -= 1;
    let mut pos = pos as usize;
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut res: Vec<Value> = Vec::new();
    let mut i = 0;
    let short = || argerr(2, "unpack", "data string too short");
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if size > ld || pos > ld - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                res.push(Value::Number(get_int(
                    &data[pos..pos + size],
                    h.big,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let f = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                res.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let d = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                res.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    match res.pop() {
                        Some(Value::Number(n)) => size = n as usize,
                        _ => return Err(rt("format 'c0' needs a previous size".into())),
                    }
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                res.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(rt("unfinished string in data".into()));
                };
                res.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => control(opt, &fmt, &mut i, &mut h, "unpack")?,
        }
        pos += size;
    }
    res.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_vec(res))
}

fn size(lua: &Lua, a: MultiValue) -> Result<f64> {
    let fmt = check_string(lua, &a, 1, "size")?;
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return Err(argerr(1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(argerr(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            control(opt, &fmt, &mut i, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

/// The `struct` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set("unpack", lua.create_function(unpack)?)?;
    t.set("size", lua.create_function(size)?)?;
    Ok(t)
}
