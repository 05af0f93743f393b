//! Numbers typed on the command line: read from the text as typed, checked against a range, and
//! refused in words that echo the text and say the range. Every flag that takes a number parses
//! through [`Ranged`], [`Pair`] or [`ByteCount`], so its error and its `--help` line say the same
//! range, and a value is never rounded into another before it is checked (`1e308` is not "inf",
//! `4294967296` is not "4294967300").

use std::ffi::OsStr;
use std::fmt;

use clap::builder::TypedValueParser;

/// What every refusal says just before the range, so that a reader (and a test) finds the range
/// the same way in each message.
pub const RANGE_IS: &str = "; the range is ";

/// A kind of number a flag takes (whole numbers and reals of each width the flags use).
pub trait Number: Copy + PartialOrd + fmt::Display + Send + Sync + 'static {
    /// A type that holds any value typed that reads as this kind (`i128` for whole numbers, `f64`
    /// for reals), so that a value too large for `Self` is compared with the range rather than
    /// refused as "not a number" or rounded first.
    type Wide: Copy + PartialOrd + fmt::Display;

    /// The largest value of the type: where a range without end stops.
    const LARGEST: Self;

    /// Reads `text` (trimmed); `Err`: what it is instead, e.g. "not a whole number".
    fn read(text: &str) -> Result<Self::Wide, &'static str>;

    /// `self` in the wide type.
    fn widen(self) -> Self::Wide;

    /// `wide`, which lies within a range of `Self`'s values, as `Self` (reals may round).
    fn narrow(wide: Self::Wide) -> Self;

    /// Whether `self` is a whole multiple of `step`.
    fn is_multiple_of(self, step: Self) -> bool;

    /// `self` as a message says it: as Rust prints it, except reals so large or small that it
    /// would print hundreds of digits, which are said as `1e308`.
    fn said(self) -> String {
        self.to_string()
    }
}

fn read_whole(text: &str) -> Result<i128, &'static str> {
    use std::num::IntErrorKind;
    match text.parse::<i128>() {
        Ok(value) => Ok(value),
        // Beyond any range a flag has: compared as the largest (or smallest) value there is.
        Err(error) if *error.kind() == IntErrorKind::PosOverflow => Ok(i128::MAX),
        Err(error) if *error.kind() == IntErrorKind::NegOverflow => Ok(i128::MIN),
        Err(_) if text.parse::<f64>().is_ok_and(f64::is_finite) => Err("not a whole number"),
        Err(_) => Err("not a number"),
    }
}

fn read_real(text: &str) -> Result<f64, &'static str> {
    match text.parse::<f64>() {
        Ok(value) if value.is_nan() => Err("not a number"),
        // "inf" typed, not a long number that overflowed (that one is "more than" the range).
        Ok(value) if value.is_infinite() && text.to_ascii_lowercase().contains("inf") => Err("not a finite number"),
        Ok(value) => Ok(value),
        Err(_) => Err("not a number"),
    }
}

macro_rules! whole_numbers {
    ($($type:ty),*) => {$(
        impl Number for $type {
            type Wide = i128;
            const LARGEST: Self = <$type>::MAX;
            fn read(text: &str) -> Result<i128, &'static str> {
                read_whole(text)
            }
            fn widen(self) -> i128 {
                self as i128
            }
            fn narrow(wide: i128) -> Self {
                wide as $type
            }
            fn is_multiple_of(self, step: Self) -> bool {
                step == 0 || self % step == 0
            }
        }
    )*};
}

whole_numbers!(u32, u64, i32, usize);

macro_rules! reals {
    ($($type:ty),*) => {$(
        impl Number for $type {
            type Wide = f64;
            const LARGEST: Self = <$type>::MAX;
            fn read(text: &str) -> Result<f64, &'static str> {
                read_real(text)
            }
            fn widen(self) -> f64 {
                f64::from(self)
            }
            fn narrow(wide: f64) -> Self {
                wide as $type
            }
            fn is_multiple_of(self, step: Self) -> bool {
                step == 0.0 || (self / step).fract() == 0.0
            }
            fn said(self) -> String {
                let size = self.abs();
                if size != 0.0 && !(1e-6..1e15).contains(&size) { format!("{self:e}") } else { self.to_string() }
            }
        }
    )*};
}

reals!(f32, f64);

/// The values a numeric flag takes: from `low` (included or not) up to `high` (or without end),
/// in `unit`, optionally a multiple of `step`. A clap value parser: `value_parser = RANGE`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranged<T> {
    low: T,
    low_included: bool,
    high: Option<T>,
    step: Option<T>,
    unit: &'static str,
}

impl<T: Number> Ranged<T> {
    /// `low` to `high`, both included.
    pub const fn new(low: T, high: T) -> Self {
        Self { low, low_included: true, high: Some(high), step: None, unit: "" }
    }

    /// More than `low`, up to `high` included (a time step or a length that must not be 0).
    pub const fn above(low: T, high: T) -> Self {
        Self { low, low_included: false, high: Some(high), step: None, unit: "" }
    }

    /// `low` or more, without end (a count, a seed, a device ordinal).
    pub const fn at_least(low: T) -> Self {
        Self { low, low_included: true, high: None, step: None, unit: "" }
    }

    /// The same range, said in `unit` ("frames", "world units", "s").
    pub const fn unit(mut self, unit: &'static str) -> Self {
        self.unit = unit;
        self
    }

    /// The same range, taking only multiples of `step`.
    pub const fn multiple_of(mut self, step: T) -> Self {
        self.step = Some(step);
        self
    }

    /// The range in words, as `--help` and errors say it: "1 to 2000 frames", "more than 0, up to
    /// 1", "0 or more", "32 to 1024 threads, a multiple of 32".
    pub fn describe(&self) -> String {
        let unit = if self.unit.is_empty() { String::new() } else { format!(" {}", self.unit) };
        let low = self.low;
        let mut words = match (self.low_included, self.high) {
            (true, Some(high)) => format!("{low} to {high}{unit}"),
            (false, Some(high)) => format!("more than {low}, up to {high}{unit}"),
            (true, None) => format!("{low} or more{unit}"),
            (false, None) => format!("more than {low}{unit}"),
        };
        if let Some(step) = self.step {
            words.push_str(&format!(", a multiple of {step}"));
        }
        words
    }

    /// Whether `value` is in the range (and a multiple of its step).
    pub fn contains(&self, value: T) -> bool {
        self.check(value.widen()).is_ok() && self.step.is_none_or(|step| value.is_multiple_of(step))
    }

    /// Refuses `value` when it is outside the range, naming it `what`: "dt 1e308 is more than 1;
    /// the range is more than 0, up to 1". For values that come from elsewhere than the command
    /// line (a state file, the panel).
    pub fn check_value(&self, what: &str, value: T) -> Result<(), String> {
        let why = match (self.check(value.widen()), self.step) {
            (Err(why), _) => why,
            (Ok(()), Some(step)) if !value.is_multiple_of(step) => format!("is not a multiple of {step}"),
            (Ok(()), _) => return Ok(()),
        };
        Err(format!("{what} {} {why}{RANGE_IS}{}", value.said(), self.describe()))
    }

    /// The value `text` names, or why it is refused: the text as typed, what is wrong with it,
    /// and the range.
    pub fn parse(&self, text: &str) -> Result<T, String> {
        self.value(text).map_err(|why| format!("{why}{RANGE_IS}{}", self.describe()))
    }

    /// The value `text` names, or what is wrong with it ("0 is less than 1"), without the range.
    fn value(&self, text: &str) -> Result<T, String> {
        let text = text.trim();
        let wide = T::read(text).map_err(|what| format!("{} is {what}", shown(text)))?;
        self.check(wide).map_err(|why| format!("{text} {why}"))?;
        let value = T::narrow(wide);
        // A real that rounds on the way to its type (1e-50 as f32 is 0) is checked as it will be used.
        self.check(value.widen()).map_err(|why| format!("{text} is {value} in this flag's precision, which {why}"))?;
        match self.step {
            Some(step) if !value.is_multiple_of(step) => Err(format!("{text} is not a multiple of {step}")),
            _ => Ok(value),
        }
    }

    fn check(&self, wide: T::Wide) -> Result<(), String> {
        let low = self.low.widen();
        if wide.partial_cmp(&low).is_none() {
            return Err("is not a number".to_owned());
        }
        if wide < low {
            return Err(format!("is less than {}", self.low));
        }
        if !self.low_included && wide == low {
            return Err(format!("is not more than {}", self.low));
        }
        let high = self.high.unwrap_or(T::LARGEST);
        if wide > high.widen() {
            return Err(format!("is more than {high}"));
        }
        Ok(())
    }
}

/// `text` as it appears in a message: quoted when it is empty, so the message still reads.
fn shown(text: &str) -> String {
    if text.is_empty() { "\"\"".to_owned() } else { text.to_owned() }
}

impl<T: Number> TypedValueParser for Ranged<T> {
    type Value = T;

    fn parse_ref(&self, command: &clap::Command, arg: Option<&clap::Arg>, value: &OsStr) -> Result<T, clap::Error> {
        let range = *self;
        (move |text: &str| range.parse(text)).parse_ref(command, arg, value)
    }
}

/// Two whole numbers typed `AxB` (a size `1280x800`, CUDA threads per block `32x8`), each in its
/// own range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    x: Ranged<u32>,
    y: Ranged<u32>,
}

impl Pair {
    /// Both numbers in `range`.
    pub const fn each(range: Ranged<u32>) -> Self {
        Self { x: range, y: range }
    }

    /// The first number in `x`, the second in `y` (a CUDA grid: y is shorter than x).
    pub const fn new(x: Ranged<u32>, y: Ranged<u32>) -> Self {
        Self { x, y }
    }

    /// The ranges in words: "each 1 to 8192", or "x 1 to 2147483647, y 1 to 65535".
    pub fn describe(&self) -> String {
        if self.x == self.y {
            format!("each {}", self.x.describe())
        } else {
            format!("x {}, y {}", self.x.describe(), self.y.describe())
        }
    }

    /// The pair `text` names, or why it is refused, with the ranges.
    pub fn parse(&self, text: &str) -> Result<[u32; 2], String> {
        let text = text.trim();
        let refused = |why: String| format!("{why}{RANGE_IS}{}", self.describe());
        let (a, b) = text
            .split_once(['x', 'X'])
            .ok_or_else(|| refused(format!("{} is not of the form AxB, e.g. 32x8", shown(text))))?;
        let x = self.x.value(a).map_err(|why| refused(format!("{text}: {why}")))?;
        let y = self.y.value(b).map_err(|why| refused(format!("{text}: {why}")))?;
        Ok([x, y])
    }
}

impl TypedValueParser for Pair {
    type Value = [u32; 2];

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<[u32; 2], clap::Error> {
        let pair = *self;
        (move |text: &str| pair.parse(text)).parse_ref(command, arg, value)
    }
}

/// A size in bytes typed with an optional K, M or G suffix (`512K`, `16M`), from `low` to `high`,
/// a multiple of `step`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByteCount {
    low: u64,
    high: u64,
    step: u64,
}

impl ByteCount {
    /// `low` to `high` bytes, multiples of `step`.
    pub const fn new(low: u64, high: u64, step: u64) -> Self {
        Self { low, high, step }
    }

    /// The range in words: "4 bytes to 4G, a multiple of 4 bytes".
    pub fn describe(&self) -> String {
        format!("{} to {} bytes, a multiple of {}", with_suffix(self.low), with_suffix(self.high), self.step)
    }

    /// The size `text` names, or why it is refused, with the range.
    pub fn parse(&self, text: &str) -> Result<usize, String> {
        let text = text.trim();
        let refused = |why: String| format!("{text} {why}{RANGE_IS}{}", self.describe());
        let (number, scale) = match text.chars().last() {
            Some('K' | 'k') => (&text[..text.len() - 1], 1i128 << 10),
            Some('M' | 'm') => (&text[..text.len() - 1], 1 << 20),
            Some('G' | 'g') => (&text[..text.len() - 1], 1 << 30),
            _ => (text, 1),
        };
        let bytes = read_whole(number).map_err(|_| refused("is not a size like 4096, 512K or 16M".to_owned()))?;
        let bytes = bytes.saturating_mul(scale);
        if bytes < i128::from(self.low) {
            return Err(refused(format!("is less than {}", with_suffix(self.low))));
        }
        if bytes > i128::from(self.high) {
            return Err(refused(format!("is more than {}", with_suffix(self.high))));
        }
        if bytes % i128::from(self.step.max(1)) != 0 {
            return Err(refused(format!("is not a multiple of {} bytes", self.step)));
        }
        usize::try_from(bytes).map_err(|_| refused("is more than this machine can address".to_owned()))
    }
}

impl TypedValueParser for ByteCount {
    type Value = usize;

    fn parse_ref(&self, command: &clap::Command, arg: Option<&clap::Arg>, value: &OsStr) -> Result<usize, clap::Error> {
        let sizes = *self;
        (move |text: &str| sizes.parse(text)).parse_ref(command, arg, value)
    }
}

/// `bytes` with the largest suffix that says it exactly: 4096 → "4K", 4294967296 → "4G".
fn with_suffix(bytes: u64) -> String {
    match bytes {
        0 => "0".to_owned(),
        b if b.is_multiple_of(1 << 30) => format!("{}G", b >> 30),
        b if b.is_multiple_of(1 << 20) => format!("{}M", b >> 20),
        b if b.is_multiple_of(1 << 10) => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// Every flag of `root` and its subcommands that takes a number but does not say, in its short
/// `--help` line, the range its parser checks and its default, each with what is missing: the
/// check that keeps a new numeric flag from slipping through without a range. A flag's range is
/// read from its own refusal of `NaN`, so the help and the parser cannot disagree.
pub fn flags_without_a_stated_range(root: &clap::Command) -> Vec<String> {
    let mut found = Vec::new();
    let mut path = vec![root.get_name().to_owned()];
    walk(root, root, &mut path, &mut found);
    found
}

fn walk(root: &clap::Command, command: &clap::Command, path: &mut Vec<String>, found: &mut Vec<String>) {
    for arg in command.get_arguments().filter(|arg| takes_a_number(arg)) {
        let Some(long) = arg.get_long() else {
            found.push(format!("{} {}: a number without a --name", path.join(" "), arg.get_id()));
            continue;
        };
        let flag = format!("{} --{long}", path.join(" "));
        let words = path.iter().cloned().chain([format!("--{long}"), "NaN".to_owned()]);
        let refusal = match root.clone().try_get_matches_from(words) {
            Ok(_) => {
                found.push(format!("{flag}: takes NaN"));
                continue;
            }
            Err(error) => error.to_string(),
        };
        let Some(range) = refusal.split_once(RANGE_IS).and_then(|(_, rest)| rest.lines().next()) else {
            found.push(format!("{flag}: its refusal of NaN says no range: {refusal:?}"));
            continue;
        };
        // A negative number reaches the range check too, rather than reading as an unknown flag.
        let negative = path.iter().cloned().chain([format!("--{long}"), "-1".to_owned()]);
        if let Err(error) = root.clone().try_get_matches_from(negative)
            && !error.to_string().contains(RANGE_IS)
        {
            found.push(format!("{flag}: -1 is not answered with the range: {:?}", error.to_string()));
        }
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        if !help.contains(range) {
            found.push(format!("{flag}: its help {help:?} does not say its range {range:?}"));
        }
        if arg.get_default_values().is_empty() && !help.contains("default") {
            found.push(format!("{flag}: its help {help:?} does not say its default"));
        }
    }
    for sub in command.get_subcommands() {
        path.push(sub.get_name().to_owned());
        walk(root, sub, path, found);
        path.pop();
    }
}

/// For every flag of `root` and its subcommands that takes a number, a command line that gives it
/// a value its parser accepts (`interop-lab nbody --bodies 1`), or the flag alone when none of a
/// few small values is accepted. Reading each into the program's own flags struct shows that the
/// parser's type is the field's: clap checks that only when the value is read, by panicking.
pub fn numeric_flag_samples(root: &clap::Command) -> Vec<Vec<String>> {
    let mut samples = Vec::new();
    let mut path = vec![root.get_name().to_owned()];
    sample(root, root, &mut path, &mut samples);
    samples
}

fn sample(root: &clap::Command, command: &clap::Command, path: &mut Vec<String>, samples: &mut Vec<Vec<String>>) {
    const CANDIDATES: [&str; 8] = ["1", "1x1", "32", "16", "4", "2", "0.5", "0"];
    for long in command.get_arguments().filter(|arg| takes_a_number(arg)).filter_map(clap::Arg::get_long) {
        let words = |value: &str| path.iter().cloned().chain([format!("--{long}"), value.to_owned()]).collect();
        let accepted = CANDIDATES
            .iter()
            .map(|value| words(value))
            .find(|words: &Vec<String>| root.clone().try_get_matches_from(words).is_ok());
        samples.push(accepted.unwrap_or_else(|| path.iter().cloned().chain([format!("--{long}")]).collect()));
    }
    for sub in command.get_subcommands() {
        path.push(sub.get_name().to_owned());
        sample(root, sub, path, samples);
        path.pop();
    }
}

/// Whether `arg` takes a value that is a number or a pair of them.
fn takes_a_number(arg: &clap::Arg) -> bool {
    use std::any::TypeId;
    let numeric = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<[u32; 2]>(),
    ];
    let kind = arg.get_value_parser().type_id();
    arg.get_action().takes_values() && numeric.iter().any(|id| kind == *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_in_range_is_read_as_typed() {
        assert_eq!(Ranged::new(1u32, 2000).parse("120"), Ok(120));
        assert_eq!(Ranged::new(1u32, 2000).parse(" 2000 "), Ok(2000));
        assert_eq!(Ranged::above(0.0f32, 1.0).parse("0.006"), Ok(0.006));
        assert_eq!(Ranged::new(-1e4f32, 1e4).parse("-5"), Ok(-5.0));
        assert_eq!(Ranged::at_least(0u64).parse("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(Ranged::new(32u32, 1024).multiple_of(32).parse("256"), Ok(256));
    }

    #[test]
    fn a_refusal_echoes_the_text_as_typed_and_says_the_range() {
        let unit = Ranged::above(0.0f64, 1.0);
        assert_eq!(unit.parse("1e308").unwrap_err(), "1e308 is more than 1; the range is more than 0, up to 1");
        assert_eq!(unit.parse("0").unwrap_err(), "0 is not more than 0; the range is more than 0, up to 1");
        let fraction = Ranged::new(0.0f32, 1.0);
        assert_eq!(fraction.parse("4294967296").unwrap_err(), "4294967296 is more than 1; the range is 0 to 1");
        assert_eq!(fraction.parse("NaN").unwrap_err(), "NaN is not a number; the range is 0 to 1");
        assert_eq!(fraction.parse("inf").unwrap_err(), "inf is not a finite number; the range is 0 to 1");
        assert_eq!(fraction.parse("").unwrap_err(), "\"\" is not a number; the range is 0 to 1");
        let frames = Ranged::new(1u32, 2000).unit("frames");
        assert_eq!(frames.parse("0").unwrap_err(), "0 is less than 1; the range is 1 to 2000 frames");
        assert_eq!(frames.parse("2.5").unwrap_err(), "2.5 is not a whole number; the range is 1 to 2000 frames");
        assert_eq!(frames.parse("lots").unwrap_err(), "lots is not a number; the range is 1 to 2000 frames");
        let threads = Ranged::new(32u32, 1024).unit("threads").multiple_of(32);
        assert_eq!(
            threads.parse("100").unwrap_err(),
            "100 is not a multiple of 32; the range is 32 to 1024 threads, a multiple of 32"
        );
    }

    #[test]
    fn whole_numbers_beyond_their_type_are_said_to_be_out_of_range_not_garbled() {
        let count = Ranged::at_least(1u32);
        assert_eq!(
            count.parse("4294967296").unwrap_err(),
            "4294967296 is more than 4294967295; the range is 1 or more"
        );
        let huge = "1".repeat(60);
        assert_eq!(count.parse(&huge).unwrap_err(), format!("{huge} is more than 4294967295; the range is 1 or more"));
        assert_eq!(count.parse("-1").unwrap_err(), "-1 is less than 1; the range is 1 or more");
    }

    #[test]
    fn a_real_that_rounds_out_of_range_in_its_type_is_refused() {
        let size = Ranged::above(0.0f32, 1.0);
        let refusal = size.parse("1e-50").unwrap_err();
        assert!(refusal.starts_with("1e-50 is 0 in this flag's precision"), "{refusal}");
    }

    #[test]
    fn values_from_elsewhere_are_checked_against_the_same_range_and_said_briefly() {
        let step = Ranged::above(0.0f64, 1.0);
        assert!(step.contains(1.0) && !step.contains(0.0) && !step.contains(f64::NAN));
        assert_eq!(step.check_value("dt", 0.5), Ok(()));
        assert_eq!(
            step.check_value("dt", 1e308).unwrap_err(),
            "dt 1e308 is more than 1; the range is more than 0, up to 1"
        );
        let threads = Ranged::new(32u32, 1024).multiple_of(32);
        assert!(threads.contains(256) && !threads.contains(100) && !threads.contains(0));
        assert_eq!(
            threads.check_value("block size", 100).unwrap_err(),
            "block size 100 is not a multiple of 32; the range is 32 to 1024, a multiple of 32"
        );
    }

    #[test]
    fn pairs_check_each_number_and_echo_the_pair() {
        let block = Pair::each(Ranged::new(1, 1024).unit("threads"));
        assert_eq!(block.parse("32x8"), Ok([32, 8]));
        assert_eq!(block.parse("0x0").unwrap_err(), "0x0: 0 is less than 1; the range is each 1 to 1024 threads");
        assert_eq!(
            block.parse("32").unwrap_err(),
            "32 is not of the form AxB, e.g. 32x8; the range is each 1 to 1024 threads"
        );
        let grid = Pair::new(Ranged::new(1, i32::MAX as u32), Ranged::new(1, 65535));
        assert_eq!(
            grid.parse("1x70000").unwrap_err(),
            "1x70000: 70000 is more than 65535; the range is x 1 to 2147483647, y 1 to 65535"
        );
    }

    #[test]
    fn byte_counts_take_suffixes_and_say_the_range_with_them() {
        let sizes = ByteCount::new(4, 4 << 30, 4);
        assert_eq!(sizes.parse("1M"), Ok(1 << 20));
        assert_eq!(sizes.parse("512k"), Ok(512 << 10));
        assert_eq!(sizes.parse("4096"), Ok(4096));
        assert_eq!(sizes.parse("9G").unwrap_err(), "9G is more than 4G; the range is 4 to 4G bytes, a multiple of 4");
        assert_eq!(sizes.parse("3").unwrap_err(), "3 is less than 4; the range is 4 to 4G bytes, a multiple of 4");
        assert_eq!(
            sizes.parse("6").unwrap_err(),
            "6 is not a multiple of 4 bytes; the range is 4 to 4G bytes, a multiple of 4"
        );
        assert!(sizes.parse("lots").unwrap_err().starts_with("lots is not a size"));
    }
}
