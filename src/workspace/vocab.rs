//! The words a run puts into the world the server sees: the seeded workspace's files and the
//! values synthesis makes up (a new file's name, a branch, an email address, text to write, a
//! search term, a table). They look like a developer's own (`quarterly-report.txt`,
//! `alice@example.com`, `feature/login-form`), never name the verifier, and vary with the run's
//! seed, so that a server that behaves only on real-looking input, or that recognises a fixed
//! sample, cannot tell it is being checked. The same seed gives the same words (`--seed N`
//! reproduces a run); finding fingerprints strip them ([`Vocabulary::words`]).

/// Subjects of a workspace: each is a file stem, a title and a search term in the seed.
const TOPICS: [(&str, &str); 12] = [
    ("quarterly-report", "Quarterly report"),
    ("meeting-notes", "Meeting notes"),
    ("project-plan", "Project plan"),
    ("release-checklist", "Release checklist"),
    ("budget-review", "Budget review"),
    ("product-roadmap", "Product roadmap"),
    ("onboarding-guide", "Onboarding guide"),
    ("team-offsite", "Team offsite"),
    ("customer-feedback", "Customer feedback"),
    ("launch-timeline", "Launch timeline"),
    ("design-review", "Design review"),
    ("sprint-retro", "Sprint retro"),
];

/// First names for email addresses and authors.
const PEOPLE: [&str; 10] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
];

/// Branch names as a team would make them.
const BRANCHES: [&str; 8] = [
    "feature/login-form",
    "feature/export-csv",
    "fix/date-parsing",
    "fix/empty-state",
    "chore/update-deps",
    "feature/dark-mode",
    "fix/typo-in-docs",
    "feature/search-filters",
];

/// Adjectives and nouns of made-up names (`blue-harbor`): what a string without meaning
/// gets. [`is_made_up`] recognises them.
const ADJECTIVES: [&str; 8] = [
    "blue", "quiet", "bright", "swift", "green", "silver", "amber", "north",
];
const NOUNS: [&str; 8] = [
    "harbor", "river", "meadow", "summit", "forest", "canyon", "island", "valley",
];

/// The words of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    /// The workspace's subject, as a file stem (`quarterly-report`).
    pub topic: &'static str,
    /// The same as a title (`Quarterly report`).
    pub title: &'static str,
    /// A person (`alice`).
    pub person: &'static str,
    /// A branch name for a new branch (`feature/login-form`).
    pub branch: &'static str,
    /// The branch the seeded repository already has besides `main` (`fix/date-parsing`).
    pub seeded_branch: &'static str,
    /// A second subject, for new files and directories (`meeting-notes`).
    pub other: &'static str,
}

impl Default for Vocabulary {
    fn default() -> Self {
        Vocabulary::of(0)
    }
}

/// A small, well-mixed hash of the seed (splitmix64), so that neighbouring seeds differ.
fn mix(seed: u64, salt: u64) -> u64 {
    let mut z = seed.wrapping_add(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Vocabulary {
    /// The words of the run with `seed`.
    pub fn of(seed: u64) -> Vocabulary {
        let pick = |salt: u64, n: usize| (mix(seed, salt) % n as u64) as usize;
        let t = pick(1, TOPICS.len());
        let mut o = pick(2, TOPICS.len() - 1);
        if o >= t {
            o += 1;
        }
        let b = pick(4, BRANCHES.len());
        let mut s = pick(5, BRANCHES.len() - 1);
        if s >= b {
            s += 1;
        }
        Vocabulary {
            topic: TOPICS[t].0,
            title: TOPICS[t].1,
            person: PEOPLE[pick(3, PEOPLE.len())],
            branch: BRANCHES[b],
            seeded_branch: BRANCHES[s],
            other: TOPICS[o].0,
        }
    }

    /// The word the seeded files share and searches look for (`report`).
    pub fn term(&self) -> &'static str {
        self.topic.rsplit('-').next().unwrap_or(self.topic)
    }

    /// An email address (`alice@example.com`).
    pub fn email(&self) -> String {
        format!("{}@example.com", self.person)
    }

    /// A new file's stem (`meeting-notes`).
    pub fn new_stem(&self) -> &'static str {
        self.other
    }

    /// A moved or copied file's stem (`quarterly-report-final`).
    pub fn moved_stem(&self) -> String {
        format!("{}-final", self.topic)
    }

    /// A new directory (`meeting-notes-archive`).
    pub fn new_dir(&self) -> String {
        format!("{}-archive", self.other)
    }

    /// Whether the workspace path `rel` is one the run's own tools made, under a name this
    /// vocabulary gives new files, moved files and new directories.
    pub fn made_by_the_run(&self, rel: &str) -> bool {
        let moved = self.moved_stem();
        let dir = self.new_dir();
        rel.split('/').any(|part| {
            let stem = part.split('.').next().unwrap_or(part);
            stem == self.new_stem() || stem == moved || part == dir
        })
    }

    /// A file that is not there (`quarterly-report-old.txt`).
    pub fn missing_file(&self) -> String {
        format!("{}-old.txt", self.topic)
    }

    /// Replacement text for an edit (`Quarterly report (revised)`).
    pub fn edited(&self) -> String {
        format!("{} (revised)", self.title)
    }

    /// A name or title (`quarterly-report`).
    pub fn name(&self) -> &'static str {
        self.topic
    }

    /// A message, comment or description.
    pub fn message(&self) -> String {
        format!(
            "Updated the {} for this week",
            self.title.to_ascii_lowercase()
        )
    }

    /// Content to write.
    pub fn content(&self) -> String {
        format!(
            "{} for this week.\nAction items are listed below.\n",
            self.title
        )
    }

    /// A new table (`meeting_notes`).
    pub fn table(&self) -> String {
        self.other.replace('-', "_")
    }

    /// The seeded workspace's text files: (path, content). They share [`Vocabulary::term`].
    pub fn seed_files(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "notes.txt",
                format!("{} notes\nAction items for next week\n", self.title),
            ),
            (
                "docs/readme.md",
                format!("# {}\n\nWhat we plan and why.\n", self.title),
            ),
            (
                "data/sample.json",
                format!(
                    "{{\"name\": \"{}\", \"owner\": \"{}\", \"items\": [1, 2, 3]}}\n",
                    self.topic,
                    self.email()
                ),
            ),
        ]
    }

    /// The seeded file committed second on `main` (the first commit holds the others).
    pub const SECOND_COMMIT_FILE: &'static str = "notes.txt";

    /// The message of the seeded repository's second commit on `main`.
    pub fn second_commit_message(&self) -> String {
        format!("Add {} notes", self.title.to_ascii_lowercase())
    }

    /// The file only the seeded repository's other branch has: (path, content, message).
    pub fn branch_commit(&self) -> (String, String, String) {
        let subject = self.other.replace('-', " ");
        (
            format!("{}.md", self.other),
            format!("# {subject}\n\nFirst ideas.\n"),
            format!("Start the {subject}"),
        )
    }

    /// The seeded file left out of the first commit.
    pub fn draft(&self) -> String {
        format!("{} draft\nnot committed yet\n", self.title)
    }

    /// Every word of this vocabulary that can appear in a value or an effect's path: finding
    /// fingerprints replace them, so that they do not depend on the run's seed.
    pub fn words(&self) -> Vec<String> {
        let mut w = vec![
            self.moved_stem(),
            self.new_dir(),
            self.missing_file(),
            self.table(),
            self.email(),
            self.branch.to_string(),
            self.seeded_branch.to_string(),
            self.topic.to_string(),
            self.other.to_string(),
            self.title.to_string(),
        ];
        w.sort_by_key(|s| std::cmp::Reverse(s.len()));
        w
    }
}

/// A made-up name (`blue-harbor`) for a string without meaning, from a number.
pub fn made_up(n: u64) -> String {
    format!(
        "{}-{}",
        ADJECTIVES[(n % 8) as usize],
        NOUNS[((n / 8) % 8) as usize]
    )
}

/// Whether `s` is a made-up name ([`made_up`]), which can name nothing that exists.
pub fn is_made_up(s: &str) -> bool {
    s.split_once('-')
        .is_some_and(|(a, n)| ADJECTIVES.contains(&a) && NOUNS.contains(&n))
}

/// The seed of synthesis's own choices (which enum value first, which variant of a schema):
/// the same in every run, so that what a run reaches does not depend on luck. The run's seed
/// varies the words only.
pub const SYNTHESIS_SEED: u64 = 0;

/// A run's seed when none was given: new for each run.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // Small enough to type back in (`--seed 123456`).
    mix(nanos, u64::from(std::process::id())) % 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_vary_with_the_seed_and_never_name_the_verifier() {
        let runs: Vec<Vocabulary> = (0..50).map(Vocabulary::of).collect();
        let topics: std::collections::BTreeSet<_> = runs.iter().map(|v| v.topic).collect();
        assert!(topics.len() >= 6, "{topics:?}");
        for v in &runs {
            assert_ne!(v.topic, v.other);
            let all = [
                v.words().join(" "),
                v.seed_files()
                    .iter()
                    .map(|(p, c)| format!("{p} {c}"))
                    .collect(),
                v.draft(),
                v.content(),
                v.message(),
                v.edited(),
            ]
            .join(" ")
            .to_ascii_lowercase();
            assert!(!all.contains("hintcheck") && !all.contains("test"), "{all}");
            for (_, content) in v.seed_files() {
                assert!(content.to_ascii_lowercase().contains(v.term()), "{content}");
            }
        }
        assert_eq!(Vocabulary::of(7), Vocabulary::of(7));
        assert!(is_made_up(&made_up(13)) && !is_made_up("quarterly-report"));
    }
}
