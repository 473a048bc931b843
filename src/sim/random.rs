//! Python's `random.Random`, bit for bit, for the draws the simulator makes.
//!
//! CPython's generator is MT19937 seeded with `init_by_array`; `random()` builds a 53-bit
//! float from two 32-bit outputs and `expovariate(lambd)` is `-ln(1 - random()) / lambd`.
//! The reference simulator makes no other random calls (no jitter, `choice` or `uniform`),
//! so those are all this module provides.

/// How Python's `random.seed(a)` turns `a` into the key for `init_by_array`.
#[derive(Clone, Debug, PartialEq)]
pub enum Seed {
    /// An integer (Python uses its absolute value).
    Int(i128),
    /// A float: Python seeds with `hash(a)` cast to an unsigned 64-bit integer (for an
    /// integral float, the integer itself).
    Float(f64),
    /// A seed this port cannot reproduce (a string is hashed with SHA-512; `None` reads the
    /// OS entropy source); the text says what it was.
    Unsupported(String),
}

impl Seed {
    /// The non-negative integer Python feeds to `init_by_array`, if this port can compute it.
    pub fn key(&self) -> Option<u128> {
        match *self {
            Seed::Int(i) => Some(i.unsigned_abs()),
            Seed::Float(x) => Some(u128::from(py_hash_float(x) as u64)),
            Seed::Unsupported(_) => None,
        }
    }
}

/// CPython's `hash(float)` for a finite float (modular arithmetic modulo 2^61 - 1).
pub fn py_hash_float(v: f64) -> i64 {
    const BITS: u32 = 61;
    const MODULUS: u64 = (1 << BITS) - 1;
    if v.is_infinite() {
        return if v > 0.0 { 314_159 } else { -314_159 };
    }
    if v.is_nan() || v == 0.0 {
        return 0;
    }
    let (mut m, mut e) = frexp(v.abs());
    let mut x: u64 = 0;
    while m != 0.0 {
        x = ((x << 28) & MODULUS) | (x >> (BITS - 28));
        m *= 268_435_456.0; // 2^28
        e -= 28;
        let y = m as u64;
        m -= y as f64;
        x += y;
        if x >= MODULUS {
            x -= MODULUS;
        }
    }
    let bits = BITS as i32;
    let e = if e >= 0 { e % bits } else { bits - 1 - ((-1 - e) % bits) } as u32;
    x = ((x << e) & MODULUS) | (x >> (BITS - e));
    let mut h = x as i64;
    if v < 0.0 {
        h = -h;
    }
    if h == -1 {
        -2
    } else {
        h
    }
}

/// `frexp` for a positive finite float: `v = m * 2^e` with `0.5 <= m < 1`.
fn frexp(v: f64) -> (f64, i32) {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // subnormal: scale up by 2^64 first
        let (m, e) = frexp(v * f64::from_bits(0x43f0_0000_0000_0000));
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (m, exp - 1022)
}

const N: usize = 624;
const M: usize = 397;

/// Python's `random.Random`: MT19937 with CPython's seeding and float conversion.
///
/// # Examples
/// ```
/// use sluicegate::sim::{PyRandom, Seed};
/// let mut rng = PyRandom::new(&Seed::Int(7)).unwrap();
/// assert_eq!(rng.random(), 0.32383276483316237); // python3: random.Random(7).random()
/// ```
#[derive(Clone)]
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)`, or `None` when the seed is [`Seed::Unsupported`].
    pub fn new(seed: &Seed) -> Option<Self> {
        let mut key = seed.key()?;
        let mut words = Vec::new();
        while key != 0 {
            words.push(key as u32);
            key >>= 32;
        }
        if words.is_empty() {
            words.push(0);
        }
        Some(Self::from_key(&words))
    }

    /// MT19937 `init_by_array`, as CPython calls it from `random.seed(int)`.
    pub fn from_key(key: &[u32]) -> Self {
        let mut mt = [0u32; N];
        mt[0] = 19_650_218;
        for i in 1..N {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        PyRandom { mt, index: N }
    }

    /// The next 32-bit output (`getrandbits(32)`).
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn twist(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        for k in 0..N {
            let y = (self.mt[k] & UPPER) | (self.mt[(k + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.mt[k] = self.mt[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// `random()`: a float in `[0, 1)` with 53 random bits.
    pub fn random(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `expovariate(lambd)`: `-ln(1 - random()) / lambd`.
    pub fn expovariate(&mut self, lambd: f64) -> f64 {
        -(1.0 - self.random()).ln() / lambd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Produced with Python 3.11.7:
    //   r = random.Random(seed); [r.random() for _ in range(3)]; random.Random(seed).expovariate(6)
    const CASES: &[(Seed, [f64; 3], f64)] = &[
        (Seed::Int(7), [0.32383276483316237, 0.15084917392450192, 0.6509344730398537], 0.06521914070580072),
        (Seed::Int(0), [0.8444218515250481, 0.7579544029403025, 0.420571580830845], 0.3101011851775372),
        (Seed::Int(1), [0.13436424411240122, 0.8474337369372327, 0.763774618976614], 0.0240485106849182),
        (Seed::Int((1 << 40) + 5), [0.5043802970418443, 0.2686044399723282, 0.9257865475671585], 0.11699106237505462),
        (Seed::Int(-3), [0.23796462709189137, 0.5442292252959519, 0.36995516654807925], 0.04529371720561139),
        (
            Seed::Int(u64::MAX as i128),
            [0.021825695401270107, 0.3380953268613758, 0.21196748656082065],
            0.0036778998777557827,
        ),
        (Seed::Float(7.0), [0.32383276483316237, 0.15084917392450192, 0.6509344730398537], 0.06521914070580072),
        (Seed::Float(1.5), [0.551763726942059, 0.2560930858958398, 0.583340633280344], 0.13373913172875226),
        (Seed::Float(-2.25), [0.9236205677220981, 0.24405611968855534, 0.01264353211011815], 0.42867363834594685),
        (Seed::Float(1e20), [0.9042630156123121, 0.24747076991734795, 0.38498867221854494], 0.39102509890816733),
    ];

    #[test]
    fn matches_cpython_random() {
        for (seed, firsts, expo) in CASES {
            let mut rng = PyRandom::new(seed).unwrap();
            let got = [rng.random(), rng.random(), rng.random()];
            assert_eq!(&got, firsts, "seed {seed:?}");
            assert_eq!(PyRandom::new(seed).unwrap().expovariate(6.0), *expo, "seed {seed:?}");
        }
    }

    #[test]
    fn matches_cpython_getrandbits() {
        // python3: r = random.Random(7); [r.getrandbits(32) for _ in range(5)]
        let mut rng = PyRandom::new(&Seed::Int(7)).unwrap();
        let got: Vec<u32> = (0..5).map(|_| rng.next_u32()).collect();
        assert_eq!(got, [1390851128, 4071050724, 647892279, 1695753998, 2795742288]);
    }

    #[test]
    fn float_hash_matches_cpython() {
        // python3: hash(1.5), hash(-2.25), hash(1e20), hash(7.0), hash(-1.0)
        assert_eq!(py_hash_float(1.5), 1152921504606846977);
        assert_eq!(py_hash_float(-2.25), -576460752303423490);
        assert_eq!(py_hash_float(1e20), 848750603811160107);
        assert_eq!(py_hash_float(7.0), 7);
        assert_eq!(py_hash_float(-1.0), -2);
    }

    #[test]
    fn a_string_seed_is_not_reproduced() {
        assert!(PyRandom::new(&Seed::Unsupported("a string".into())).is_none());
    }
}
