//! Domain packs: what the explorer knows of one kind of server, kept apart from the core. The
//! core ([`super::feedback`], [`super::semantics`], [`super::explore`]) reads errors and
//! descriptions as any server writes them and names no domain; a pack adds the rules seen in
//! one kind of server only: error rules ([`crate::exercise::feedback::Rule`], each with the
//! real error texts it was built from), values by meaning for its parameters (a git revision,
//! an A1 range, a SQL statement) and the notation in which its values embed a name (a sheet in
//! `Data!B2:B9`). Each pack is self-contained in its directory; [`Packs`] says which are in
//! force (`--packs`, all by default), so that reach can be measured with none.

pub mod git;
pub mod notes;
pub mod spreadsheets;
pub mod sql;

use serde_json::Value;

use super::feedback::Rule;
use super::semantics::{ParamWords, Semantics};

/// One domain's knowledge.
pub struct Pack {
    /// Its name, as `--packs` takes it.
    pub name: &'static str,
    /// What kind of server it is for.
    pub about: &'static str,
    /// Error rules, tried after the core's.
    pub rules: &'static [Rule],
    /// A value for a parameter, by meaning, at a stage of the core's choice.
    pub choose: Option<Choose>,
    /// How a name is embedded in a value of this domain, where one is.
    pub notation: Option<Notation>,
    /// Words for the things its tools keep by name (`sheet`, `branch`): a parameter named so
    /// takes a name the server listed.
    pub entities: &'static [&'static str],
    /// Words for the context a session of its servers selects (`vault`): a tool that sets one
    /// is session set-up, and an error that says none is selected asks for it.
    pub contexts: &'static [&'static str],
}

/// A pack's value for a parameter: at a stage, for a tool's meaning, the parameter's words,
/// its name and its description.
pub type Choose = fn(Stage, &Semantics, &ParamWords, &str, &str) -> Option<Value>;

/// Where in the core's choice of a value a pack is asked (the core's order decides which
/// meaning wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Before web addresses (a repository to clone by its path).
    Address,
    /// Among places (after web addresses and base64 content, before paths).
    Place,
    /// Among things to run (before commands and code).
    Program,
}

/// A name embedded in a value (`Data!B2:B9` refers to sheet `Data`).
#[derive(Clone, Copy)]
pub struct Notation {
    /// The byte range of `name` where it begins a reference in `s`.
    pub at: fn(s: &str, name: &str) -> Option<std::ops::Range<usize>>,
    /// `name` written so that it can stand in a reference.
    pub quote: fn(name: &str) -> String,
}

/// Every pack.
pub const ALL: &[&Pack] = &[&git::PACK, &notes::PACK, &spreadsheets::PACK, &sql::PACK];

/// The packs in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packs {
    names: Vec<&'static str>,
}

impl Default for Packs {
    /// Every pack.
    fn default() -> Self {
        Packs::all()
    }
}

/// A `--packs` value that names no pack.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("unknown pack '{given}' (known: {}; or all, none)", known())]
pub struct UnknownPack {
    /// The name given.
    pub given: String,
}

fn known() -> String {
    ALL.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

impl Packs {
    /// Every pack.
    pub fn all() -> Packs {
        Packs {
            names: ALL.iter().map(|p| p.name).collect(),
        }
    }

    /// No pack: the core alone.
    pub fn none() -> Packs {
        Packs { names: Vec::new() }
    }

    /// From `all`, `none`, or a comma-separated list of pack names (`all` in it: every pack).
    pub fn parse(s: &str) -> Result<Packs, UnknownPack> {
        if s.trim() == "none" || s.trim().is_empty() {
            return Ok(Packs::none());
        }
        if s.split(',').any(|n| n.trim() == "all") {
            return Ok(Packs::all());
        }
        let mut names = Vec::new();
        for given in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let pack = ALL.iter().find(|p| p.name == given).ok_or(UnknownPack {
                given: given.to_string(),
            })?;
            if !names.contains(&pack.name) {
                names.push(pack.name);
            }
        }
        Ok(Packs { names })
    }

    /// The packs in force.
    pub fn iter(&self) -> impl Iterator<Item = &'static Pack> + '_ {
        ALL.iter().copied().filter(|p| self.names.contains(&p.name))
    }

    /// Their names, for the report (`none` when there are none).
    pub fn describe(&self) -> String {
        if self.names.is_empty() {
            "none".into()
        } else {
            self.names.join(", ")
        }
    }

    /// The first value a pack in force chooses for a parameter at `stage`.
    pub fn choose(
        &self,
        stage: Stage,
        semantics: &Semantics,
        p: &ParamWords,
        name: &str,
        hint: &str,
    ) -> Option<Value> {
        self.iter()
            .filter_map(|pack| pack.choose)
            .find_map(|choose| choose(stage, semantics, p, name, hint))
    }

    /// The entity words of the packs in force.
    pub fn entities(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.iter().flat_map(|p| p.entities.iter().copied())
    }

    /// The context words of the packs in force.
    pub fn contexts(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.iter().flat_map(|p| p.contexts.iter().copied())
    }

    /// The notations of the packs in force.
    pub fn notations(&self) -> impl Iterator<Item = Notation> + '_ {
        self.iter().filter_map(|p| p.notation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_are_chosen_by_name_all_or_none() {
        assert_eq!(Packs::parse("all").expect("all"), Packs::all());
        assert_eq!(Packs::parse("git, all").expect("all"), Packs::all());
        assert_eq!(Packs::parse("none").expect("none").describe(), "none");
        let some = Packs::parse("sql, git,sql").expect("list");
        assert_eq!(some.describe(), "sql, git");
        // In the registry's order, whatever the list's.
        assert_eq!(
            some.iter().map(|p| p.name).collect::<Vec<_>>(),
            ["git", "sql"]
        );
        let e = Packs::parse("git,excel").expect_err("unknown");
        assert_eq!(e.given, "excel");
        assert!(
            e.to_string()
                .contains("known: git, notes, spreadsheets, sql"),
            "{e}"
        );
    }

    #[test]
    fn every_pack_rule_says_what_triggers_it_and_what_it_learns() {
        for pack in ALL {
            assert!(!pack.about.is_empty(), "{}", pack.name);
            for rule in pack.rules {
                assert!(
                    !rule.trigger.is_empty() && !rule.learns.is_empty(),
                    "{}",
                    rule.name
                );
            }
        }
    }
}
