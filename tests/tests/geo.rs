//! GEO commands against the real binary: the documented examples over the
//! wire, STORE forms, and differential runs against Valkey 8.1 — random
//! points (spread over the globe and clustered), random GEOSEARCH /
//! GEORADIUS / GEORADIUSBYMEMBER queries with every option, GEODIST,
//! GEOPOS and GEOHASH, and the argument errors — whose replies must be the
//! same byte for byte in RESP2 and in RESP3.

use ringkv_e2e::{Backend, Raw, Reply, e2e};

e2e!(
    fn the_documented_examples(b) {
        let srv = b.server();
        let mut c = srv.raw();
        let add = [
            "GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669",
            "Catania",
        ];
        assert_eq!(c.cmd(&add), Reply::Int(2));
        assert_eq!(
            c.cmd(&["GEODIST", "Sicily", "Palermo", "Catania", "km"]),
            Reply::bulk("166.2742")
        );
        assert_eq!(
            c.cmd(&["GEOHASH", "Sicily", "Palermo", "nope"]),
            Reply::Array(vec![Reply::bulk("sqc8b49rny0"), Reply::Nil])
        );
        assert_eq!(
            c.cmd(&["GEOPOS", "Sicily", "Catania"]),
            Reply::Array(vec![Reply::Array(vec![
                Reply::bulk("15.08726745843887329"),
                Reply::bulk("37.50266842333162032"),
            ])])
        );
        assert_eq!(
            c.cmd(&["GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"]),
            Reply::Array(vec![Reply::bulk("Catania"), Reply::bulk("Palermo")])
        );
        assert_eq!(
            c.cmd(&["GEOSEARCHSTORE", "near", "Sicily", "FROMMEMBER", "Catania", "BYBOX", "10", "10", "km"]),
            Reply::Int(1)
        );
        assert_eq!(
            c.cmd(&["ZRANGE", "near", "0", "-1"]),
            Reply::Array(vec![Reply::bulk("Catania")])
        );
        // The points are sorted-set members.
        assert_eq!(c.cmd(&["TYPE", "Sicily"]), Reply::status("zset"));
        assert_eq!(c.cmd(&["ZREM", "Sicily", "Palermo"]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["GEORADIUSBYMEMBER", "Sicily", "Catania", "500", "km"]),
            Reply::Array(vec![Reply::bulk("Catania")])
        );
    }
);

/// xorshift64*: reproducible test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [lo, hi).
    fn f(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Roughly normal (sum of uniforms), mean 0, deviation `sd`.
    fn gauss(&mut self, sd: f64) -> f64 {
        (0..6).map(|_| self.f(-1.0, 1.0)).sum::<f64>() * sd / std::f64::consts::SQRT_2
    }
}

/// Send `cmd` to both servers; the replies must be identical.
fn same(a: &mut Raw, v: &mut Raw, cmd: &[&str]) -> Reply {
    let ours = a.cmd(cmd);
    let theirs = v.cmd(cmd);
    assert_eq!(ours, theirs, "{cmd:?}");
    ours
}

/// 1500 points over the globe in `world`, 1500 clustered around Sicily in
/// `island` (plus the poles' and antimeridian's edges).
fn load(a: &mut Raw, v: &mut Raw, rng: &mut Rng) {
    let mut world = vec!["GEOADD".to_string(), "world".to_string()];
    for i in 0..1500 {
        world.push(format!("{}", rng.f(-180.0, 180.0)));
        world.push(format!("{}", rng.f(-85.05, 85.05)));
        world.push(format!("w{i}"));
    }
    for (i, (x, y)) in [
        (-180.0, -85.05112878),
        (180.0, 85.05112878),
        (179.9999, 0.0),
        (-179.9999, 0.5),
    ]
    .iter()
    .enumerate()
    {
        world.extend([x.to_string(), y.to_string(), format!("edge{i}")]);
    }
    let mut island = vec!["GEOADD".to_string(), "island".to_string()];
    for i in 0..1500 {
        island.push(format!("{}", 14.0 + rng.gauss(1.0)));
        island.push(format!("{}", 37.5 + rng.gauss(0.8)));
        island.push(format!("p{i}"));
    }
    for cmd in [world, island] {
        let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
        same(a, v, &refs);
    }
}

/// A random member of either set.
fn member(rng: &mut Rng) -> String {
    if rng.below(2) == 0 {
        format!("w{}", rng.below(1500))
    } else {
        format!("p{}", rng.below(1500))
    }
}

fn random_query(rng: &mut Rng) -> Vec<String> {
    let island = rng.below(2) == 0;
    let key = if island { "island" } else { "world" };
    let (cx, cy) = if island {
        (14.0 + rng.gauss(1.5), 37.5 + rng.gauss(1.2))
    } else {
        (rng.f(-180.0, 180.0), rng.f(-85.0, 85.0))
    };
    let units = [
        ("m", 1.0),
        ("km", 1000.0),
        ("ft", 0.3048),
        ("mi", 1609.34),
        ("KM", 1000.0),
    ];
    let (unit, per) = units[rng.below(units.len())];
    let radii = [0.0, 500.0, 20_000.0, 150_000.0, 900_000.0, 6_000_000.0];
    let r = radii[rng.below(radii.len())] / per;
    let mut opts: Vec<String> = Vec::new();
    for o in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
        if rng.below(3) == 0 {
            opts.push(o.into());
        }
    }
    match rng.below(4) {
        0 => opts.push("ASC".into()),
        1 => opts.push("DESC".into()),
        _ => {}
    }
    if rng.below(3) == 0 {
        opts.extend(["COUNT".to_string(), (1 + rng.below(30)).to_string()]);
        if rng.below(3) == 0 {
            opts.push("ANY".into());
        }
    }
    let s = |x: f64| format!("{x}");
    let mut q: Vec<String> = match rng.below(4) {
        0 => vec![
            "GEOSEARCH".into(),
            key.into(),
            "FROMLONLAT".into(),
            s(cx),
            s(cy),
            "BYRADIUS".into(),
            s(r),
            unit.into(),
        ],
        1 => {
            let h = r * rng.f(0.2, 2.5);
            vec![
                "GEOSEARCH".into(),
                key.into(),
                "FROMMEMBER".into(),
                member(rng),
                "BYBOX".into(),
                s(r),
                s(h),
                unit.into(),
            ]
        }
        2 => vec![
            "GEORADIUS_RO".into(),
            key.into(),
            s(cx),
            s(cy),
            s(r),
            unit.into(),
        ],
        _ => vec![
            "GEORADIUSBYMEMBER".into(),
            key.into(),
            member(rng),
            s(r),
            unit.into(),
        ],
    };
    q.extend(opts);
    q
}

e2e!(
    ringkv_only fn searches_reply_exactly_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        load(&mut a, &mut v, &mut rng);
        for proto in ["2", "3"] {
            a.cmd(&["HELLO", proto]);
            v.cmd(&["HELLO", proto]);
            for _ in 0..250 {
                let q = random_query(&mut rng);
                let refs: Vec<&str> = q.iter().map(String::as_str).collect();
                same(&mut a, &mut v, &refs);
                let (m1, m2) = (member(&mut rng), member(&mut rng));
                for unit in ["m", "mi"] {
                    same(&mut a, &mut v, &["GEODIST", "island", &m1, &m2, unit]);
                    same(&mut a, &mut v, &["GEODIST", "world", &m1, &m2, unit]);
                }
                same(&mut a, &mut v, &["GEOPOS", "world", &m1, "nope", "edge1", &m2]);
                same(&mut a, &mut v, &["GEOHASH", "island", &m1, &m2, "nope"]);
            }
            for e in 0..4 {
                let m = format!("edge{e}");
                same(&mut a, &mut v, &["GEOPOS", "world", &m]);
                same(&mut a, &mut v, &["GEORADIUSBYMEMBER", "world", &m, "3000", "km", "WITHCOORD", "ASC"]);
            }
        }
    }
);

e2e!(
    ringkv_only fn stores_and_errors_are_valkeys(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        let mut rng = Rng(42);
        load(&mut a, &mut v, &mut rng);
        same(&mut a, &mut v, &["SET", "str", "x"]);
        same(&mut a, &mut v, &["ZADD", "odd", "-5", "neg", "1e300", "huge", "0.5", "half"]);
        let cases: &[&[&str]] = &[
            &["GEORADIUS", "island", "14", "37.5", "50", "km", "STORE", "d1"],
            &["ZRANGE", "d1", "0", "-1", "WITHSCORES"],
            &["GEORADIUS", "island", "14", "37.5", "50", "km", "STOREDIST", "d2", "COUNT", "5", "DESC"],
            &["ZRANGE", "d2", "0", "-1", "WITHSCORES"],
            &["GEOSEARCHSTORE", "d3", "island", "FROMMEMBER", "p1", "BYBOX", "80", "40", "km", "STOREDIST", "COUNT", "7"],
            &["ZRANGE", "d3", "0", "-1", "WITHSCORES"],
            &["GEORADIUS", "island", "0", "0", "1", "km", "STORE", "d1"],
            &["EXISTS", "d1"],
            &["GEOSEARCHSTORE", "d3", "nokey", "FROMMEMBER", "p1", "BYRADIUS", "1", "km"],
            &["EXISTS", "d3"],
            &["GEOADD", "island", "NX", "CH", "14", "37", "p1", "14", "37", "fresh"],
            &["GEOADD", "island", "XX", "CH", "14.5", "37", "p1", "14", "37", "other"],
            &["GEOADD", "island", "NX", "XX", "14", "37", "p1"],
            &["GEOADD", "island", "CH", "CH", "14", "37"],
            &["GEOADD", "island", "200", "37", "m"],
            &["GEOADD", "island", "14", "-86", "m"],
            &["GEOADD", "island", "inf", "1", "m"],
            &["GEOADD", "island", "abc", "1", "m"],
            &["GEOADD", "str", "1", "1", "m"],
            &["GEODIST", "island", "p1", "p2", "yd"],
            &["GEODIST", "island", "p1", "p2", "km", "x"],
            &["GEODIST", "nokey", "p1", "p2"],
            &["GEODIST", "island", "p1", "nope"],
            &["GEODIST", "str", "a", "b"],
            &["GEOPOS", "str", "a"],
            &["GEOPOS", "nokey", "a", "b"],
            &["GEOHASH", "nokey", "a"],
            &["GEOHASH", "island"],
            &["GEOPOS", "odd", "neg", "huge", "half"],
            &["GEOHASH", "odd", "neg", "huge", "half"],
            &["GEORADIUS", "island", "14", "37", "-1", "km"],
            &["GEORADIUS", "island", "14", "37", "x", "km"],
            &["GEORADIUS", "island", "14", "37", "1", "parsec"],
            &["GEORADIUS", "island", "14", "99", "1", "km"],
            &["GEORADIUS", "island", "14", "37", "1", "km", "COUNT", "0"],
            &["GEORADIUS", "island", "14", "37", "1", "km", "COUNT", "x"],
            &["GEORADIUS", "island", "14", "37", "1", "km", "COUNT"],
            &["GEORADIUS", "island", "14", "37", "1", "km", "ANY"],
            &["GEORADIUS", "island", "14", "37", "1", "km", "bogus"],
            &["GEORADIUS", "island", "14", "37", "1", "km", "STORE", "d", "WITHHASH"],
            &["GEORADIUS", "str", "14", "37", "1", "km"],
            &["GEORADIUS", "nokey", "14", "37", "1", "km"],
            &["GEORADIUS_RO", "island", "14", "37", "1", "km", "STORE", "d"],
            &["GEORADIUSBYMEMBER", "island", "nope", "1", "km"],
            &["GEORADIUSBYMEMBER", "nokey", "nope", "abc", "xx"],
            &["GEORADIUSBYMEMBER_RO", "island", "p1", "1", "km", "STOREDIST", "d"],
            &["GEOSEARCH", "island", "FROMLONLAT", "14", "37", "BYBOX", "1", "-1", "km"],
            &["GEOSEARCH", "island", "FROMLONLAT", "14", "37", "BYBOX", "x", "1", "km"],
            &["GEOSEARCH", "island", "FROMLONLAT", "14", "37", "BYBOX", "1", "x", "km"],
            &["GEOSEARCH", "island", "FROMLONLAT", "14", "37", "BYRADIUS", "1", "km", "BYBOX", "1", "1", "km"],
            &["GEOSEARCH", "island", "FROMMEMBER", "p1", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"],
            &["geosearch", "island", "BYRADIUS", "1", "km", "ASC", "DESC"],
            &["GeoSearch", "island", "FROMMEMBER", "p1", "ASC", "DESC", "ASC"],
            &["GEOSEARCH", "island", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"],
            &["GEOSEARCH", "nokey", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"],
            &["GEOSEARCH", "nokey", "FROMLONLAT", "500", "1", "BYRADIUS", "1", "km"],
            &["GEOSEARCH", "island", "FROMMEMBER", "p1", "BYRADIUS", "1", "km", "STORE", "x"],
            &["GEOSEARCH", "island", "FROMMEMBER", "p1", "BYRADIUS", "1", "km", "STOREDIST"],
            &["GEOSEARCHSTORE", "d3", "island", "FROMMEMBER", "p1", "BYRADIUS", "1", "km", "WITHDIST"],
            &["GEOSEARCHSTORE", "d3", "str", "FROMMEMBER", "p1", "BYRADIUS", "1", "km"],
            &["GEOSEARCH", "world", "FROMLONLAT", "0", "0", "BYRADIUS", "50000", "km", "COUNT", "3"],
            &["GEOSEARCH", "world", "FROMLONLAT", "0", "0", "BYRADIUS", "0", "km"],
        ];
        for proto in ["2", "3"] {
            a.cmd(&["HELLO", proto]);
            v.cmd(&["HELLO", proto]);
            for cmd in cases {
                same(&mut a, &mut v, cmd);
            }
        }
    }
);
