//! The geohash arithmetic behind the GEO commands, as Valkey does it
//! (`geohash.c`, `geohash_helper.c`): a point is a 52-bit integer that
//! interleaves 26 bits of latitude (even bits) with 26 bits of longitude
//! (odd bits), stored as a sorted-set score. A search covers the cell of
//! the centre at a step chosen from the radius plus its 8 neighbours, and
//! keeps the points whose haversine distance (or box test) passes.
//!
//! Every floating-point step follows Valkey's order of operations, so the
//! scores, coordinates and distances come out bit for bit the same.

/// Bits per coordinate of a stored point (52 in all).
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

/// Valkey's earth radius for the haversine formula.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// The ranges stored points are encoded in (Web Mercator's latitude limits).
pub const WGS84_LONG: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const WGS84_LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A cell: `step` bits per coordinate, interleaved in `bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    /// A neighbour dropped from the search (Valkey's `GZERO`).
    const ZERO: Hash = Hash { bits: 0, step: 0 };

    pub fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The cell as a span of 52-bit scores, `min <= score < max`.
    pub fn score_span(self) -> (f64, f64) {
        let shift = 52 - u32::from(self.step) * 2;
        let min = self.bits << shift;
        let max = (self.bits + 1) << shift;
        (min as f64, max as f64)
    }
}

/// A cell's bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub hash: Hash,
    pub longitude: Range,
    pub latitude: Range,
}

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// Spread the low 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gather the even bits of `v` into 32 bits.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// Latitude bits in the even positions, longitude bits in the odd ones.
pub fn interleave(lat: u32, long: u32) -> u64 {
    spread(lat) | (spread(long) << 1)
}

/// The inverse of [`interleave`]: `(lat, long)`.
pub fn deinterleave(bits: u64) -> (u32, u32) {
    (squash(bits), squash(bits >> 1))
}

/// `geohashEncode`: the cell of `step` bits per coordinate holding the
/// point, or `None` outside the ranges (or Valkey's coordinate limits).
pub fn encode(long_r: Range, lat_r: Range, long: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&long) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || long < long_r.min || long > long_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let long_off = (long - long_r.min) / (long_r.max - long_r.min) * scale;
    // C's double -> uint32_t conversion truncates; the offsets are in
    // [0, 2^step] here.
    Some(Hash {
        bits: interleave(lat_off as u32, long_off as u32),
        step,
    })
}

/// A point's score: its 52-bit cell in the WGS84 ranges.
pub fn encode_wgs84(long: f64, lat: f64) -> Option<u64> {
    encode(WGS84_LONG, WGS84_LAT, long, lat, STEP_MAX).map(|h| h.bits)
}

/// `geohashDecode`: the cell's bounds.
pub fn decode(long_r: Range, lat_r: Range, hash: Hash) -> Area {
    let (ilat, ilong) = deinterleave(hash.bits);
    let scale = (1u64 << hash.step) as f64;
    let lat_scale = lat_r.max - lat_r.min;
    let long_scale = long_r.max - long_r.min;
    Area {
        hash,
        latitude: Range {
            min: lat_r.min + (f64::from(ilat) / scale) * lat_scale,
            max: lat_r.min + (f64::from(ilat.wrapping_add(1)) / scale) * lat_scale,
        },
        longitude: Range {
            min: long_r.min + (f64::from(ilong) / scale) * long_scale,
            max: long_r.min + (f64::from(ilong.wrapping_add(1)) / scale) * long_scale,
        },
    }
}

/// The centre of a cell, clamped to the coordinate limits: `[long, lat]`.
pub fn area_center(a: &Area) -> [f64; 2] {
    let long = ((a.longitude.min + a.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.latitude.min + a.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [long, lat]
}

/// C's `(uint64_t)score` on x86-64 (what gcc emits for the conversion):
/// truncation, with out-of-range values wrapping as the instruction does.
fn score_bits(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    // `cvttsd2si`: out of range (or NaN) is the "integer indefinite" i64::MIN.
    let cvt = |d: f64| {
        if d > -TWO63 - 1.0 && d < TWO63 {
            d as i64
        } else {
            i64::MIN
        }
    };
    if score < TWO63 {
        cvt(score) as u64
    } else {
        (cvt(score - TWO63) as u64) ^ (1 << 63)
    }
}

/// A stored score back to its point: `[long, lat]` of the cell's centre.
pub fn decode_score(score: f64) -> [f64; 2] {
    let hash = Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    };
    area_center(&decode(WGS84_LONG, WGS84_LAT, hash))
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    h.bits = x | y;
}

/// The 8 cells around one, in Valkey's order: north, south, east, west,
/// north-east, north-west, south-east, south-west. Longitude wraps.
pub fn neighbours(h: Hash) -> [Hash; 8] {
    let at = |dx: i8, dy: i8| {
        let mut n = h;
        move_x(&mut n, dx);
        move_y(&mut n, dy);
        n
    };
    [
        at(0, 1),
        at(0, -1),
        at(1, 0),
        at(-1, 0),
        at(1, 1),
        at(-1, 1),
        at(1, -1),
        at(-1, -1),
    ]
}

/// Distance along a meridian, in meters.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Valkey's haversine distance in meters.
pub fn distance(long1: f64, lat1: f64, long2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(long1);
    let lon2r = deg_rad(long2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    // Same longitude: skip the expensive part, as Valkey does.
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers around its centre, in meters (the unit's
/// conversion already applied by [`Shape::radius_m`] and friends).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Extent {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// A search area: a centre `[long, lat]`, the extent in the user's unit and
/// the unit's meters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub xy: [f64; 2],
    pub extent: Extent,
    pub conversion: f64,
}

impl Shape {
    /// The distance (meters) from the centre to a point, when the point is
    /// inside the shape (`geoWithinShape`).
    #[inline]
    pub fn contains(&self, long: f64, lat: f64) -> Option<f64> {
        let [x1, y1] = self.xy;
        match self.extent {
            Extent::Radius(r) => {
                let d = distance(x1, y1, long, lat);
                (d <= r * self.conversion).then_some(d)
            }
            Extent::Box { width, height } => {
                let (w, h) = (width * self.conversion, height * self.conversion);
                // The latitude test is the cheaper one.
                if lat_distance(lat, y1) > h / 2.0 {
                    return None;
                }
                if distance(long, lat, x1, lat) > w / 2.0 {
                    return None;
                }
                Some(distance(x1, y1, long, lat))
            }
        }
    }

    /// `geohashBoundingBox`: `[min_long, min_lat, max_long, max_lat]`.
    fn bounding_box(&self) -> [f64; 4] {
        let [long, lat] = self.xy;
        let (height, width) = match self.extent {
            Extent::Radius(r) => (self.conversion * r, self.conversion * r),
            Extent::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let long_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
        let long_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
        // The hemispheres bulge in opposite directions.
        let d = if lat < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [long - d, lat - lat_delta, long + d, lat + lat_delta]
    }

    /// The radius (meters) that decides the search's step: the circle's, or
    /// the box's centre-to-corner distance.
    fn radius_m(&self) -> f64 {
        let r = match self.extent {
            Extent::Radius(r) => r,
            Extent::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        r * self.conversion
    }
}

/// `geohashEstimateStepsByRadius`.
pub fn steps_for_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2; // Make sure the range is included in most of the base cases.
    // Wider cells towards the poles.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The cells to scan for a search, in Valkey's order: the centre's cell,
/// then north, south, east, west, north-east, north-west, south-east,
/// south-west. Cells the area cannot reach are zero ([`Hash::is_zero`]).
pub fn search_cells(shape: &Shape) -> [Hash; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = shape.bounding_box();
    let [long, lat] = shape.xy;
    let mut steps = steps_for_radius(shape.radius_m(), lat);
    let cell = |steps| {
        // The centre passed the coordinate checks: it always encodes.
        let hash = encode(WGS84_LONG, WGS84_LAT, long, lat, steps).unwrap_or(Hash::ZERO);
        (hash, neighbours(hash), decode(WGS84_LONG, WGS84_LAT, hash))
    };
    let (mut hash, mut nb, mut area) = cell(steps);
    // Near the edge of its cell the area can reach past the neighbours:
    // one step coarser then.
    let [n, s, e, w] = [nb[0], nb[1], nb[2], nb[3]].map(|h| decode(WGS84_LONG, WGS84_LAT, h));
    let decrease = n.latitude.max < max_lat
        || s.latitude.min > min_lat
        || e.longitude.max < max_lon
        || w.longitude.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (hash, nb, area) = cell(steps);
    }
    // Drop the neighbours the area does not reach.
    if steps >= 2 {
        const N: usize = 0;
        const S: usize = 1;
        const E: usize = 2;
        const W: usize = 3;
        const NE: usize = 4;
        const NW: usize = 5;
        const SE: usize = 6;
        const SW: usize = 7;
        let mut drop = |ids: [usize; 3]| ids.iter().for_each(|&i| nb[i] = Hash::ZERO);
        if area.latitude.min < min_lat {
            drop([S, SW, SE]);
        }
        if area.latitude.max > max_lat {
            drop([N, NE, NW]);
        }
        if area.longitude.min < min_lon {
            drop([W, SW, NW]);
        }
        if area.longitude.max > max_lon {
            drop([E, SE, NE]);
        }
    }
    [hash, nb[0], nb[1], nb[2], nb[3], nb[4], nb[5], nb[6], nb[7]]
}

/// A point's standard 11-character geohash (latitude over -90..90).
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let [long, lat] = decode_score(score);
    let r_long = Range {
        min: -180.0,
        max: 180.0,
    };
    let r_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(r_long, r_lat, long, lat, 26).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    // 52 bits make 10 characters; the 11th is always '0', as in Valkey.
    for (i, c) in out.iter_mut().take(10).enumerate() {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Palermo and Catania, the examples of Valkey's documentation.
    const PALERMO: (f64, f64) = (13.361389, 38.115556);
    const CATANIA: (f64, f64) = (15.087269, 37.502669);

    #[test]
    fn encodes_the_documented_scores() {
        assert_eq!(encode_wgs84(PALERMO.0, PALERMO.1), Some(3479099956230698));
        assert_eq!(encode_wgs84(CATANIA.0, CATANIA.1), Some(3479447370796909));
    }

    #[test]
    fn refuses_points_past_the_limits() {
        assert_eq!(encode_wgs84(180.1, 0.0), None);
        assert_eq!(encode_wgs84(0.0, 85.06), None);
        assert_eq!(encode_wgs84(0.0, -85.06), None);
        assert!(encode_wgs84(-180.0, -85.05112878).is_some());
    }

    #[test]
    fn decodes_to_the_cell_centre() {
        let [long, lat] = decode_score(3479099956230698.0);
        assert_eq!(format!("{long:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        // Round trip within a cell's size (~0.6 m at the equator).
        for &(x, y) in &[
            (0.0, 0.0),
            (-179.99, 84.9),
            (120.5, -33.25),
            (PALERMO.0, PALERMO.1),
        ] {
            let s = encode_wgs84(x, y).unwrap();
            let [dx, dy] = decode_score(s as f64);
            assert!((dx - x).abs() < 1e-5 && (dy - y).abs() < 1e-5, "{x},{y}");
            assert_eq!(encode_wgs84(dx, dy), Some(s));
        }
    }

    #[test]
    fn interleaves_bit_by_bit() {
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
        assert_eq!(interleave(0xffff_ffff, 0), 0x5555_5555_5555_5555);
        let (a, b) = deinterleave(interleave(0x1234_5678, 0x0abc_def0));
        assert_eq!((a, b), (0x1234_5678, 0x0abc_def0));
    }

    #[test]
    fn neighbours_are_the_adjacent_cells() {
        let h = encode(WGS84_LONG, WGS84_LAT, 10.0, 20.0, 10).unwrap();
        let (lat, long) = deinterleave(h.bits);
        let nb = neighbours(h);
        let at = |i: usize| deinterleave(nb[i].bits);
        assert_eq!(at(0), (lat + 1, long)); // north
        assert_eq!(at(1), (lat - 1, long)); // south
        assert_eq!(at(2), (lat, long + 1)); // east
        assert_eq!(at(3), (lat, long - 1)); // west
        assert_eq!(at(4), (lat + 1, long + 1));
        assert_eq!(at(5), (lat + 1, long - 1));
        assert_eq!(at(6), (lat - 1, long + 1));
        assert_eq!(at(7), (lat - 1, long - 1));
        // Longitude wraps around at the antimeridian.
        let edge = encode(WGS84_LONG, WGS84_LAT, 179.99, 0.0, 4).unwrap();
        let (_, l) = deinterleave(neighbours(edge)[2].bits);
        assert_eq!(l, 0);
    }

    #[test]
    fn distances_are_valkeys_haversine() {
        // GEODIST's documented example measures between the stored points.
        let [x1, y1] = decode_score(3479099956230698.0);
        let [x2, y2] = decode_score(3479447370796909.0);
        let d = distance(x1, y1, x2, y2);
        assert!((d - 166274.1516).abs() < 1e-4, "{d}");
        // Same meridian: the latitude formula.
        assert_eq!(distance(5.0, 1.0, 5.0, 2.0), lat_distance(1.0, 2.0));
        assert_eq!(distance(1.0, 2.0, 1.0, 2.0), 0.0);
    }

    #[test]
    fn estimates_steps_from_the_radius() {
        assert_eq!(steps_for_radius(0.0, 0.0), 26);
        assert_eq!(steps_for_radius(200_000.0, 0.0), 6);
        assert_eq!(steps_for_radius(200_000.0, 70.0), 5);
        assert_eq!(steps_for_radius(200_000.0, -85.0), 4);
        assert_eq!(steps_for_radius(1.0, 0.0), 24);
        assert_eq!(steps_for_radius(1e9, 0.0), 1);
    }

    #[test]
    fn a_search_scans_the_centre_cell_and_the_reachable_neighbours() {
        let shape = Shape {
            xy: [15.0, 37.0],
            extent: Extent::Radius(200.0),
            conversion: 1000.0,
        };
        let cells = search_cells(&shape);
        let (lo, hi) = cells[0].score_span();
        let c = encode_wgs84(15.0, 37.0).unwrap() as f64;
        assert!(lo <= c && c < hi);
        // Catania (~ 56 km away) falls in one of the cells scanned.
        let cat = encode_wgs84(CATANIA.0, CATANIA.1).unwrap() as f64;
        assert!(cells.iter().filter(|h| !h.is_zero()).any(|h| {
            let (lo, hi) = h.score_span();
            lo <= cat && cat < hi
        }));
    }

    #[test]
    fn box_test_checks_both_sides() {
        let shape = Shape {
            xy: [0.0, 0.0],
            extent: Extent::Box {
                width: 200.0,
                height: 100.0,
            },
            conversion: 1000.0,
        };
        assert!(shape.contains(0.8, 0.0).is_some()); // ~89 km east
        assert!(shape.contains(0.0, 0.8).is_none()); // ~89 km north
        assert!(shape.contains(0.0, 0.4).is_some());
    }

    #[test]
    fn geohash_strings_use_the_standard_ranges() {
        assert_eq!(&geohash_string(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(&geohash_string(3479447370796909.0), b"sqdtr74hyu0");
    }
}
