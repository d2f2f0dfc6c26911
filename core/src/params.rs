//! Run-time parameters (Open MPI's MCA parameters).
//!
//! Every tunable has a name, a default and a description, and is registered by the component that
//! owns it. Its value comes from the first source that has one, in the order the platform gave
//! them (e.g. launcher flags, then environment, then a config file), else from the default; the
//! registry remembers which source won, so an info tool can show it. The core never reads the
//! environment itself: sources are the platform's.

use core::fmt;

use heapless::{String, Vec};

use crate::error::{Allowed, Error, ErrorClass, Reason, Result};

/// Longest string value.
pub const MAX_STR: usize = 128;
/// Most parameters one process can register.
pub const MAX_PARAMS: usize = 128;
/// Most sources.
pub const MAX_SOURCES: usize = 4;

/// The type and range of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer in `min..=max`; accepts `k`, `m`, `g` suffixes (powers of 1024) and `0x`.
    Int {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// `1/0`, `true/false`, `yes/no`, `on/off`.
    Bool,
    /// Free text, e.g. a component list.
    Str,
}

/// A default value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    /// Integer default.
    Int(i64),
    /// Boolean default.
    Bool(bool),
    /// String default.
    Str(&'static str),
}

/// A parameter's definition, declared as a `static` by the component that owns it.
#[derive(Debug)]
pub struct ParamDef {
    /// Name, `<framework>_<component>_<name>` as Open MPI spells them, e.g. `btl_self_eager_limit`.
    pub name: &'static str,
    /// Type and range.
    pub kind: Kind,
    /// Value when no source sets one.
    pub default: Default,
    /// One line for the info tool.
    pub description: &'static str,
}

impl ParamDef {
    /// The error refusing a value of this parameter, naming the values its kind accepts.
    pub fn refused(&'static self) -> Error {
        let allowed = match self.kind {
            Kind::Int { min, max } => Allowed::Range { min, max },
            Kind::Bool => Allowed::Text("1/0, true/false, yes/no or on/off"),
            Kind::Str => Allowed::Text("text of at most 128 bytes"),
        };
        self.refused_with(allowed)
    }

    /// The error refusing a value of this parameter that breaks a rule of its own (`allowed`).
    pub fn refused_with(&'static self, allowed: Allowed) -> Error {
        Error::new(
            ErrorClass::Arg,
            Reason::BadParam {
                name: self.name,
                allowed,
            },
        )
    }
}

/// A parameter's current value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Integer value.
    Int(i64),
    /// Boolean value.
    Bool(bool),
    /// String value.
    Str(String<MAX_STR>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

/// Where a value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The definition's default.
    Default,
    /// A configuration file.
    File,
    /// An environment variable.
    Environment,
    /// The launcher's command line (`--mca name value`).
    CommandLine,
    /// Set by the program through an API call.
    Api,
}

impl Source {
    /// Lower-case name for listings.
    pub const fn name(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Environment => "environment",
            Source::CommandLine => "command line",
            Source::Api => "api",
        }
    }
}

/// A place values come from, supplied by the platform.
pub trait ParamSource: Sync {
    /// Which kind of source this is.
    fn source(&self) -> Source;
    /// Writes the raw text of `name`'s value into `out`, returning its length, if this source sets it.
    fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize>;
}

/// A registered parameter.
#[derive(Debug)]
pub struct Entry {
    /// Its definition.
    pub def: &'static ParamDef,
    /// Current value.
    pub value: Value,
    /// Where the value came from.
    pub source: Source,
}

/// The registry of a process's parameters.
pub struct Params {
    entries: Vec<Entry, MAX_PARAMS>,
    sources: Vec<&'static dyn ParamSource, MAX_SOURCES>,
}

impl Params {
    /// A registry whose values come from `sources`, first source winning.
    pub fn new(sources: &[&'static dyn ParamSource]) -> Params {
        let mut s = Vec::new();
        for src in sources.iter().take(MAX_SOURCES) {
            let _ = s.push(*src);
        }
        Params {
            entries: Vec::new(),
            sources: s,
        }
    }

    /// Registers `def` (idempotent), resolving its value from the sources.
    pub fn register(&mut self, def: &'static ParamDef) -> Result<()> {
        if self.entry(def.name).is_some() {
            return Ok(());
        }
        let mut value = default_value(def);
        let mut source = Source::Default;
        let mut buf = [0u8; MAX_STR];
        for src in &self.sources {
            if let Some(n) = src.lookup(def.name, &mut buf) {
                let text = core::str::from_utf8(&buf[..n.min(MAX_STR)]).map_err(|_| bad(def))?;
                value = parse(def, text)?;
                source = src.source();
                break;
            }
        }
        self.entries
            .push(Entry { def, value, source })
            .map_err(|_| {
                Error::exhausted(
                    "parameter registry",
                    MAX_PARAMS as u32,
                    "(compile-time MAX_PARAMS)",
                )
            })
    }

    /// Registers every definition in `defs`.
    pub fn register_all(&mut self, defs: &[&'static ParamDef]) -> Result<()> {
        defs.iter().try_for_each(|d| self.register(d))
    }

    /// Sets `name` from text, as a program or tool would; the source becomes [`Source::Api`].
    pub fn set(&mut self, name: &str, text: &str) -> Result<()> {
        let e = self
            .entries
            .iter_mut()
            .find(|e| e.def.name == name)
            .ok_or(Error::bad_arg("no parameter of that name is registered"))?;
        e.value = parse(e.def, text)?;
        e.source = Source::Api;
        Ok(())
    }

    /// The entry for `name`.
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.def.name == name)
    }

    /// Integer value of a registered integer parameter (its default if unregistered).
    pub fn int(&self, def: &'static ParamDef) -> i64 {
        match self.entry(def.name).map(|e| &e.value) {
            Some(Value::Int(v)) => *v,
            _ => match def.default {
                Default::Int(v) => v,
                _ => 0,
            },
        }
    }

    /// Integer value as `usize`, clamped at zero.
    pub fn usize(&self, def: &'static ParamDef) -> usize {
        self.int(def).max(0) as usize
    }

    /// Integer value as `u32`, saturating.
    pub fn u32(&self, def: &'static ParamDef) -> u32 {
        self.int(def).clamp(0, u32::MAX as i64) as u32
    }

    /// Boolean value of a registered boolean parameter.
    pub fn bool(&self, def: &'static ParamDef) -> bool {
        match self.entry(def.name).map(|e| &e.value) {
            Some(Value::Bool(v)) => *v,
            _ => matches!(def.default, Default::Bool(true)),
        }
    }

    /// String value of a registered string parameter.
    pub fn str(&self, def: &'static ParamDef) -> &str {
        match self.entry(def.name).map(|e| &e.value) {
            Some(Value::Str(s)) => s.as_str(),
            _ => match def.default {
                Default::Str(s) => s,
                _ => "",
            },
        }
    }

    /// Every registered parameter, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }
}

fn bad(def: &'static ParamDef) -> Error {
    def.refused()
}

fn default_value(def: &ParamDef) -> Value {
    match def.default {
        Default::Int(v) => Value::Int(v),
        Default::Bool(v) => Value::Bool(v),
        Default::Str(s) => {
            let mut out = String::new();
            let _ = out.push_str(&s[..s.len().min(MAX_STR)]);
            Value::Str(out)
        }
    }
}

fn parse(def: &'static ParamDef, text: &str) -> Result<Value> {
    let text = text.trim();
    match def.kind {
        Kind::Int { min, max } => {
            let v = parse_int(text).ok_or(bad(def))?;
            if v < min || v > max {
                return Err(bad(def));
            }
            Ok(Value::Int(v))
        }
        Kind::Bool => match text {
            "1" | "true" | "yes" | "on" | "TRUE" | "YES" | "ON" => Ok(Value::Bool(true)),
            "0" | "false" | "no" | "off" | "FALSE" | "NO" | "OFF" => Ok(Value::Bool(false)),
            _ => Err(bad(def)),
        },
        Kind::Str => {
            let mut s = String::new();
            s.push_str(text).map_err(|_| bad(def))?;
            Ok(Value::Str(s))
        }
    }
}

/// Parses `123`, `-4`, `0x1f`, `64k`, `8M`, `1g`.
pub fn parse_int(text: &str) -> Option<i64> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (digits, mult) = match body.as_bytes().last()? {
        b'k' | b'K' => (&body[..body.len() - 1], 1i64 << 10),
        b'm' | b'M' => (&body[..body.len() - 1], 1 << 20),
        b'g' | b'G' => (&body[..body.len() - 1], 1 << 30),
        _ => (body, 1),
    };
    let v = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i64::from_str_radix(hex, 16).ok()?
    } else {
        digits.parse::<i64>().ok()?
    };
    let v = v.checked_mul(mult)?;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    static EAGER: ParamDef = ParamDef {
        name: "btl_test_eager_limit",
        kind: Kind::Int {
            min: 64,
            max: 1 << 30,
        },
        default: Default::Int(4096),
        description: "eager limit",
    };
    static FLAG: ParamDef = ParamDef {
        name: "pml_test_flag",
        kind: Kind::Bool,
        default: Default::Bool(false),
        description: "a flag",
    };
    static LIST: ParamDef = ParamDef {
        name: "btl",
        kind: Kind::Str,
        default: Default::Str("self,sm"),
        description: "BTLs to use",
    };

    struct Fixed(Source, &'static [(&'static str, &'static str)]);
    impl ParamSource for Fixed {
        fn source(&self) -> Source {
            self.0
        }
        fn lookup(&self, name: &str, out: &mut [u8]) -> Option<usize> {
            let (_, v) = self.1.iter().find(|(n, _)| *n == name)?;
            out[..v.len()].copy_from_slice(v.as_bytes());
            Some(v.len())
        }
    }

    static CMDLINE: Fixed = Fixed(Source::CommandLine, &[("btl", "tcp,self")]);
    static ENV: Fixed = Fixed(
        Source::Environment,
        &[
            ("btl", "sm"),
            ("btl_test_eager_limit", "64k"),
            ("pml_test_flag", "yes"),
        ],
    );
    static BAD: Fixed = Fixed(Source::Environment, &[("btl_test_eager_limit", "12")]);

    #[test]
    fn defaults_apply_without_sources() {
        let mut p = Params::new(&[]);
        p.register_all(&[&EAGER, &FLAG, &LIST]).unwrap();
        assert_eq!(p.int(&EAGER), 4096);
        assert!(!p.bool(&FLAG));
        assert_eq!(p.str(&LIST), "self,sm");
        assert_eq!(p.entry("btl").unwrap().source, Source::Default);
    }

    #[test]
    fn first_source_wins_and_is_remembered() {
        let mut p = Params::new(&[&CMDLINE, &ENV]);
        p.register_all(&[&EAGER, &FLAG, &LIST]).unwrap();
        assert_eq!(p.str(&LIST), "tcp,self");
        assert_eq!(p.entry("btl").unwrap().source, Source::CommandLine);
        assert_eq!(p.int(&EAGER), 65536);
        assert_eq!(
            p.entry("btl_test_eager_limit").unwrap().source,
            Source::Environment
        );
        assert!(p.bool(&FLAG));
    }

    #[test]
    fn out_of_range_value_is_a_clear_error() {
        let mut p = Params::new(&[&BAD]);
        let e = p.register(&EAGER).unwrap_err();
        assert_eq!(
            e.reason,
            Reason::BadParam {
                name: "btl_test_eager_limit",
                allowed: Allowed::Range {
                    min: 64,
                    max: 1 << 30
                }
            }
        );
        // The message names the range, so a user who raised a limit too far learns how far.
        assert_eq!(
            std::format!("{}", e.reason),
            "parameter btl_test_eager_limit has an invalid value; allowed: an integer from 64 \
             to 1073741824"
        );
    }

    #[test]
    fn set_by_api() {
        let mut p = Params::new(&[]);
        p.register(&EAGER).unwrap();
        p.set("btl_test_eager_limit", "0x100").unwrap();
        assert_eq!(p.int(&EAGER), 256);
        assert_eq!(p.entry("btl_test_eager_limit").unwrap().source, Source::Api);
        assert!(p.set("btl_test_eager_limit", "bogus").is_err());
        assert!(p.set("nope", "1").is_err());
    }

    #[test]
    fn int_syntax() {
        assert_eq!(parse_int("8M"), Some(8 << 20));
        assert_eq!(parse_int("-3"), Some(-3));
        assert_eq!(parse_int("0x10k"), Some(16 << 10));
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("k"), None);
        assert_eq!(parse_int("99999999999999999999"), None);
    }
}
