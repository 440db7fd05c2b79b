//! How an option's value is found: the same option struct is read from every place that may
//! set it (the command line, a scenario, the config file, hintcheck's defaults), each such
//! reading is a layer, and [`Layer::merge`] lays them over each other generically (a value
//! set in a higher layer wins; lists are joined, the higher layer's items last) while
//! [`Sources`] keeps where each value came from, for errors that name the right place and for
//! the report. The [`options!`](crate::options) macro declares an option struct once and
//! derives its command-line flags (clap), its file keys (serde) and its layering from that one
//! declaration.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use clap::builder::TypedValueParser;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The command line.
    Flag,
    /// A scenario file.
    Scenario(PathBuf),
    /// The config file.
    ConfigFile(PathBuf),
    /// hintcheck's own default.
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag => f.write_str("the command line"),
            Source::Scenario(p) => write!(f, "the scenario {}", p.display()),
            Source::ConfigFile(p) => write!(f, "the config file {}", p.display()),
            Source::Default => f.write_str("the default"),
        }
    }
}

/// An option's place: its section and key in files, and (found from clap) its flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OptionKey {
    /// The file section, e.g. `[run]`.
    pub section: &'static str,
    /// The key in that section (the option struct's field), e.g. `call_timeout`.
    pub key: &'static str,
}

impl fmt::Display for OptionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.section, self.key)
    }
}

/// Where every option's value came from: the layer that set it (for a list, every layer
/// that added to it). Options no layer set, and that have no default, are not listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    by_option: BTreeMap<OptionKey, Vec<Source>>,
    flags: BTreeMap<OptionKey, String>,
}

impl Sources {
    /// Records that `source` set (or added to) `option`.
    pub fn record(&mut self, option: OptionKey, source: &Source) {
        let list = self.by_option.entry(option).or_default();
        if !list.contains(source) {
            list.push(source.clone());
        }
    }

    /// Remembers the command-line flag of `option` (`--call-timeout`).
    pub fn name_flag(&mut self, option: OptionKey, flag: String) {
        self.flags.insert(option, flag);
    }

    /// The layers `option`'s value came from (empty: unset, no default).
    pub fn of(&self, section: &'static str, key: &'static str) -> &[Source] {
        self.by_option
            .get(&OptionKey { section, key })
            .map_or(&[], Vec::as_slice)
    }

    /// Whether the command line set `option`.
    pub fn from_flag(&self, section: &'static str, key: &'static str) -> bool {
        self.of(section, key).contains(&Source::Flag)
    }

    /// How an error about `option`'s value names it: its flag when the command line set it,
    /// else its section and key, after the file, line and column of its value when a file
    /// set it (`hintcheck.toml:4:16: [run] call_timeout`).
    pub fn name(&self, section: &'static str, key: &'static str) -> String {
        let option = OptionKey { section, key };
        let flag = self.flags.get(&option);
        match (self.of(section, key).first(), flag) {
            (Some(Source::Flag), Some(flag)) => flag.clone(),
            // A default is named as the flag that would change it.
            (Some(Source::Default) | None, Some(flag)) => flag.clone(),
            (Some(Source::Scenario(file) | Source::ConfigFile(file)), _) => {
                let path: Vec<&str> = section
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .split('.')
                    .chain([key])
                    .collect();
                let at = std::fs::read_to_string(file)
                    .ok()
                    .and_then(|text| crate::text::toml::value_location(&text, &path));
                match at {
                    Some((line, column)) => {
                        format!("{}:{line}:{column}: {option}", file.display())
                    }
                    None => format!("{} ({})", option, file.display()),
                }
            }
            _ => option.to_string(),
        }
    }

    /// One line per option set anywhere but by default: `--timeout from the command line`,
    /// `[run] repeat from the scenario …`. The order is the sections', then the keys'.
    pub fn describe(&self) -> Vec<String> {
        self.by_option
            .iter()
            .filter(|(_, sources)| sources.iter().any(|s| *s != Source::Default))
            .map(|(option, sources)| {
                let name = match (sources.first(), self.flags.get(option)) {
                    (Some(Source::Flag), Some(flag)) => flag.clone(),
                    _ => option.to_string(),
                };
                let from: Vec<String> = sources
                    .iter()
                    .filter(|s| **s != Source::Default)
                    .map(ToString::to_string)
                    .collect();
                format!("{name} from {}", from.join(" and "))
            })
            .collect()
    }

    /// The options set anywhere but by default, grouped by where they came from (the command
    /// line first, then the scenario, then the config file): `("the command line",
    /// ["--timeout"])`, `("the scenario s.toml", ["[run] repeat"])`.
    pub fn grouped(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(&Source, Vec<String>)> = Vec::new();
        for (option, sources) in &self.by_option {
            for source in sources.iter().filter(|s| **s != Source::Default) {
                let name = match (source, self.flags.get(option)) {
                    (Source::Flag, Some(flag)) => flag.clone(),
                    _ => option.to_string(),
                };
                match groups.iter_mut().find(|(s, _)| *s == source) {
                    Some((_, names)) => names.push(name),
                    None => groups.push((source, vec![name])),
                }
            }
        }
        let rank = |s: &Source| match s {
            Source::Flag => 0,
            Source::Scenario(_) => 1,
            Source::ConfigFile(_) => 2,
            Source::Default => 3,
        };
        groups.sort_by_key(|(s, _)| rank(s));
        groups
            .into_iter()
            .map(|(s, names)| (s.to_string(), names))
            .collect()
    }

    /// Takes in what `other` recorded.
    pub fn extend(&mut self, other: Sources) {
        for (option, sources) in other.by_option {
            for s in sources {
                self.record(option, &s);
            }
        }
        self.flags.extend(other.flags);
    }
}

/// An option struct that is read in layers (see [`options!`](crate::options)).
pub trait Layer: Sized + Default {
    /// Its file section, e.g. `[run]`.
    const SECTION: &'static str;

    /// The layer of hintcheck's defaults.
    fn defaults() -> Self;

    /// Lays `lower` under `self`: values `self` leaves unset come from `lower`, lists are
    /// joined; what `lower` provided is recorded as coming from `source`.
    fn over(self, lower: Self, source: &Source, sources: &mut Sources) -> Self;

    /// Resolves the layer's relative paths against `base` (the directory of the file the
    /// layer was read from).
    fn rebase(&mut self, base: &Path);

    /// Remembers the command-line flag of every field.
    fn name_flags(sources: &mut Sources);

    /// The help text of every field's default, by clap argument id.
    fn default_texts() -> Vec<(&'static str, String)>;

    /// The layers merged, highest first, with the defaults under them all: the merged value
    /// and where each of its values came from.
    fn merge(layers: Vec<(Source, Self)>) -> (Self, Sources) {
        let mut sources = Sources::default();
        Self::name_flags(&mut sources);
        let mut merged = Self::default();
        for (source, layer) in layers {
            merged = merged.over(layer, &source, &mut sources);
        }
        let merged = merged.over(Self::defaults(), &Source::Default, &mut sources);
        (merged, sources)
    }
}

/// One field's share of layering: whether a layer set it, and how a lower layer's value
/// joins a higher one's.
pub trait Merge {
    /// Lays `lower` under `self`; true when `lower` provided something.
    fn absorb(&mut self, lower: Self) -> bool;
}

impl<T> Merge for Option<T> {
    fn absorb(&mut self, lower: Self) -> bool {
        if self.is_none() && lower.is_some() {
            *self = lower;
            true
        } else {
            false
        }
    }
}

/// Lists join, the lower layer's items first.
fn join<T>(upper: &mut Vec<T>, mut lower: Vec<T>) -> bool {
    if lower.is_empty() {
        return false;
    }
    lower.append(upper);
    *upper = lower;
    true
}

impl Merge for Vec<PathBuf> {
    fn absorb(&mut self, lower: Self) -> bool {
        join(self, lower)
    }
}

impl Merge for Vec<u16> {
    fn absorb(&mut self, lower: Self) -> bool {
        join(self, lower)
    }
}

/// Tools' arguments join; the higher layer's come last, so they win per tool.
impl Merge for Vec<(String, serde_json::Value)> {
    fn absorb(&mut self, lower: Self) -> bool {
        join(self, lower)
    }
}

/// Named values (environment variables, headers) join, but a name the higher layer gives
/// replaces the lower layer's values of that name; a name repeated within one layer keeps
/// every value (a header sent twice).
impl Merge for Vec<(String, String)> {
    fn absorb(&mut self, lower: Self) -> bool {
        let kept: Vec<(String, String)> = lower
            .into_iter()
            .filter(|(name, _)| !self.iter().any(|(upper, _)| upper == name))
            .collect();
        join(self, kept)
    }
}

/// A field's paths, resolved against the directory of the file that set them.
pub trait Rebase {
    /// Joins relative paths to `base`; values that are not paths stay.
    fn rebase(&mut self, _base: &Path) {}
}

impl Rebase for Option<PathBuf> {
    fn rebase(&mut self, base: &Path) {
        if let Some(p) = self {
            *p = base.join(&*p);
        }
    }
}

impl Rebase for Vec<PathBuf> {
    fn rebase(&mut self, base: &Path) {
        for p in self {
            *p = base.join(&*p);
        }
    }
}

impl Rebase for Option<Vec<PathBuf>> {
    fn rebase(&mut self, base: &Path) {
        for p in self.iter_mut().flatten() {
            *p = base.join(&*p);
        }
    }
}

macro_rules! not_paths {
    ($($t:ty),* $(,)?) => { $(impl Rebase for $t {})* };
}

not_paths!(
    Option<usize>,
    Option<u64>,
    Option<u16>,
    Option<bool>,
    Option<String>,
    Option<Vec<String>>,
    Vec<u16>,
    Vec<(String, String)>,
    Vec<(String, serde_json::Value)>,
);

impl<T> Rebase for Option<Choice<T>> {}

/// A value among fixed choices (`--era auto|modern|legacy`): checked by clap when it comes
/// from a flag, and when the file is read when it comes from a file, so that the error shows
/// the file's line and column, the choices, and the closest one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice<T>(T);

impl<T: ValueEnum + Clone + Send + Sync + 'static> Choice<T> {
    /// The value parser of a flag taking one of `T`'s values (they show in `--help`).
    pub fn parser() -> impl TypedValueParser<Value = Choice<T>> {
        clap::builder::EnumValueParser::<T>::new().map(Choice)
    }

    /// The choice.
    pub fn known(&self) -> T {
        self.0.clone()
    }
}

impl<T> From<T> for Choice<T> {
    fn from(t: T) -> Self {
        Choice(t)
    }
}

impl<T: ValueEnum> fmt::Display for Choice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => f.write_str("?"),
        }
    }
}

impl<'de, T: ValueEnum> serde::Deserialize<'de> for Choice<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        T::from_str(&name, false).map(Choice).map_err(|_| {
            let names: Vec<String> = T::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value())
                .map(|v| v.get_name().to_string())
                .collect();
            let mut message = format!("{name:?} is not {}", crate::text::one_of(&names));
            if let Some(close) = crate::text::closest(&name, names.iter().map(String::as_str)) {
                message.push_str(&format!("; did you mean {close:?}?"));
            }
            serde::de::Error::custom(message)
        })
    }
}

/// The flag of every argument of an option struct, by clap argument id.
pub fn flags_of<A: clap::Args>() -> Vec<(String, String)> {
    A::augment_args(clap::Command::new("options"))
        .get_arguments()
        .filter_map(|a| Some((a.get_id().to_string(), format!("--{}", a.get_long()?))))
        .collect()
}

/// Declares an option struct once: each field's doc is its `--help` text and its file
/// documentation, its attributes say its flag (clap) and its key (serde), `= value` gives its
/// default (shown in `--help` as `[default: value]`). The struct derives clap's `Args` and
/// serde's `Deserialize` (unknown keys are errors), and [`Layer`](crate::config::layers::Layer)
/// for layering.
#[macro_export]
macro_rules! options {
    (
        $(#[$smeta:meta])*
        pub struct $name:ident in $section:literal {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident : $fty:ty $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$smeta])*
        #[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $fty, )*
        }

        impl $crate::config::layers::Layer for $name {
            const SECTION: &'static str = $section;

            fn defaults() -> Self {
                Self { $( $field: $crate::options!(@default $($default)?), )* }
            }

            fn over(
                mut self,
                lower: Self,
                source: &$crate::config::layers::Source,
                sources: &mut $crate::config::layers::Sources,
            ) -> Self {
                $(
                    if $crate::config::layers::Merge::absorb(&mut self.$field, lower.$field) {
                        sources.record(
                            $crate::config::layers::OptionKey {
                                section: $section,
                                key: stringify!($field),
                            },
                            source,
                        );
                    }
                )*
                self
            }

            fn rebase(&mut self, base: &std::path::Path) {
                $( $crate::config::layers::Rebase::rebase(&mut self.$field, base); )*
            }

            fn name_flags(sources: &mut $crate::config::layers::Sources) {
                let flags = $crate::config::layers::flags_of::<Self>();
                $(
                    if let Some((_, flag)) = flags.iter().find(|(id, _)| id == stringify!($field)) {
                        sources.name_flag(
                            $crate::config::layers::OptionKey {
                                section: $section,
                                key: stringify!($field),
                            },
                            flag.clone(),
                        );
                    }
                )*
            }

            #[allow(unused_mut, unused_variables)]
            fn default_texts() -> Vec<(&'static str, String)> {
                let defaults = Self::defaults();
                let mut out = Vec::new();
                $($(
                    let _ = stringify!($default);
                    if let Some(value) = &defaults.$field {
                        out.push((stringify!($field), value.to_string()));
                    }
                )?)*
                out
            }
        }
    };
    (@default) => { Default::default() };
    (@default $default:expr) => { Some($default) };
}
