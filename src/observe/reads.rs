//! Reads of the planted secrets: an inotify instance of its own watches each file that holds
//! a canary (never a directory: listing `~/.ssh` reads no key) for opens and reads, whoever
//! makes them (an open closed after writing, in the same window, is no read). Nothing of hintcheck opens those files while the server runs (the snapshot
//! observer knows them by their metadata only), so every event is the server's: one
//! [`Observation::Secret`] per file and window.

use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::{ObserveError, Observer, ObserverStatus};
use crate::evidence::{Mechanism, Observation, SecretMove, SecretSighting};

/// A file to watch: its real path, how reports name it, and the kinds of secret it holds.
#[derive(Debug, Clone)]
pub struct SecretFile {
    /// Where it is on the host.
    pub path: PathBuf,
    /// `~/.aws/credentials`, `$WORKSPACE/.env`.
    pub place: String,
    /// `aws-access-key-id, aws-secret-access-key`.
    pub kinds: String,
}

/// The observer of reads of the planted secrets.
pub struct SecretReads {
    fd: Option<OwnedFd>,
    /// Watch descriptor → the file.
    watched: HashMap<i32, SecretFile>,
    /// Watch descriptors of the workspace's decoys (files beside the secrets that hold none).
    decoys: Vec<i32>,
    /// Files that could not be watched.
    unwatched: Vec<String>,
    notes: Vec<String>,
}

impl SecretReads {
    /// Watches `files` from now on, and `decoys`: workspace files that hold no secret, which
    /// nothing but a sweep of the workspace reads (a window that reads a decoy and a
    /// workspace secret did not single the secret out).
    pub fn new(files: Vec<SecretFile>, decoys: &[PathBuf]) -> SecretReads {
        let mut me = SecretReads {
            fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok(),
            watched: HashMap::new(),
            decoys: Vec::new(),
            unwatched: Vec::new(),
            notes: Vec::new(),
        };
        for file in files {
            let added = me.fd.as_ref().map(|fd| {
                inotify::add_watch(
                    fd,
                    &file.path,
                    WatchFlags::OPEN
                        | WatchFlags::ACCESS
                        | WatchFlags::CLOSE_WRITE
                        | WatchFlags::DONT_FOLLOW,
                )
            });
            match added {
                Some(Ok(wd)) => {
                    me.watched.insert(wd, file);
                }
                _ => me.unwatched.push(file.place),
            }
        }
        for decoy in decoys {
            if let Some(Ok(wd)) = me.fd.as_ref().map(|fd| {
                inotify::add_watch(
                    fd,
                    decoy,
                    WatchFlags::OPEN
                        | WatchFlags::ACCESS
                        | WatchFlags::CLOSE_WRITE
                        | WatchFlags::DONT_FOLLOW,
                )
            }) {
                me.decoys.push(wd);
            }
        }
        if !me.unwatched.is_empty() {
            me.notes.push(format!(
                "reads of the planted secrets in {} are not observed (no inotify watch)",
                me.unwatched.join(", ")
            ));
        }
        me
    }
}

impl Observer for SecretReads {
    fn checkpoint(&mut self) -> Result<Vec<Observation>, ObserveError> {
        let Some(fd) = self.fd.as_ref() else {
            return Ok(Vec::new());
        };
        // Per file: whether its content was read (else only opened).
        let mut seen: BTreeMap<i32, bool> = BTreeMap::new();
        let mut swept = false;
        // Per file: opened in this window, and closed after writing.
        let mut written: BTreeMap<i32, (bool, bool)> = BTreeMap::new();
        let mut buf = [MaybeUninit::<u8>::uninit(); 8 * 1024];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were lost: any file may have been read, and none is left out.
                self.notes.push(
                    "the queue of reads of the planted secrets overflowed: every planted file counts as possibly read in that window"
                        .into(),
                );
                for wd in self.watched.keys() {
                    seen.entry(*wd).or_default();
                }
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                // Removed or replaced: later reads of the path are not seen.
                if let Some(file) = self.watched.remove(&event.wd()) {
                    self.notes.push(format!(
                        "the planted {} was removed or replaced: later reads of it are not observed",
                        file.place
                    ));
                    self.unwatched.push(file.place);
                }
                self.decoys.retain(|d| *d != event.wd());
                continue;
            }
            let read = flags.contains(ReadFlags::ACCESS);
            if self.decoys.contains(&event.wd()) {
                // A sweep reads what it opens; an open alone proves nothing.
                swept |= read;
                continue;
            }
            let window = written.entry(event.wd()).or_default();
            if flags.contains(ReadFlags::OPEN) {
                window.0 = true;
            }
            if flags.contains(ReadFlags::CLOSE_WRITE) {
                window.1 = true;
            }
            if read {
                *seen.entry(event.wd()).or_default() = true;
            }
        }
        // An open counts unless it was closed after writing in the same window (a tool that
        // writes `.env` did not read a credential).
        for (wd, (opened, closed_written)) in written {
            if opened && !closed_written {
                seen.entry(wd).or_default();
            }
        }
        Ok(seen
            .into_iter()
            .filter_map(|(wd, read)| {
                let file = self.watched.get(&wd)?;
                Some(Observation::Secret(SecretSighting {
                    how: SecretMove::Read,
                    kind: file.kinds.clone(),
                    place: file.place.clone(),
                    encoding: if read { "read" } else { "opened" }.into(),
                    target: None,
                    asked: false,
                    swept: swept && file.place.starts_with("$WORKSPACE/"),
                    mechanism: Mechanism::Notify,
                }))
            })
            .collect())
    }

    fn status(&self) -> ObserverStatus {
        ObserverStatus {
            name: "secret-reads".into(),
            covers: format!(
                "opens and reads of the {} files holding planted secrets (inotify)",
                self.watched.len()
            ),
            blind_spots: self
                .unwatched
                .iter()
                .map(|p| format!("reads of {p}"))
                .collect(),
        }
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn release(&mut self) {
        if let Some(fd) = &self.fd {
            for wd in self.watched.keys().chain(&self.decoys) {
                let _ = inotify::remove_watch(fd, *wd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_and_reads_of_a_watched_file_are_seen_once_a_window_and_listing_is_not() {
        let dir = tempfile::tempdir().expect("dir");
        let ssh = dir.path().join(".ssh");
        std::fs::create_dir(&ssh).expect("mkdir");
        let key = ssh.join("id_ed25519");
        std::fs::write(&key, "secret").expect("write");
        std::fs::write(ssh.join("known_hosts"), "host").expect("write");
        let mut o = SecretReads::new(
            vec![SecretFile {
                path: key.clone(),
                place: "~/.ssh/id_ed25519".into(),
                kinds: "ssh-private-key".into(),
            }],
            &[],
        );
        // A listing and a read of another file are not reads of the key.
        let _ = std::fs::read_dir(&ssh).expect("list").count();
        let _ = std::fs::read(ssh.join("known_hosts")).expect("read");
        let _ = std::fs::metadata(&key).expect("stat");
        assert!(o.checkpoint().expect("checkpoint").is_empty());
        for _ in 0..3 {
            let _ = std::fs::read(&key).expect("read");
        }
        let seen = o.checkpoint().expect("checkpoint");
        assert_eq!(seen.len(), 1, "{seen:?}");
        let Observation::Secret(s) = &seen[0] else {
            panic!("{seen:?}")
        };
        assert_eq!((s.how, s.encoding.as_str()), (SecretMove::Read, "read"));
        assert_eq!(s.place, "~/.ssh/id_ed25519");
        // Opened without reading.
        drop(std::fs::File::open(&key).expect("open"));
        let Some(Observation::Secret(s)) = o.checkpoint().expect("checkpoint").pop() else {
            panic!("no open seen")
        };
        assert_eq!(s.encoding, "opened");
        assert!(o.checkpoint().expect("checkpoint").is_empty());
        // Opened to write is no read.
        drop(
            std::fs::OpenOptions::new()
                .append(true)
                .open(&key)
                .expect("open to write"),
        );
        assert!(o.checkpoint().expect("checkpoint").is_empty());
        // Replaced: said, and no longer claimed.
        let fresh = ssh.join("id_ed25519.new");
        std::fs::write(&fresh, "other").expect("write");
        std::fs::rename(&fresh, &key).expect("rename");
        assert!(o.checkpoint().expect("checkpoint").is_empty());
        assert!(
            o.take_notes()
                .iter()
                .any(|n| n.contains("removed or replaced")),
            "no note"
        );
        assert_eq!(o.status().blind_spots, ["reads of ~/.ssh/id_ed25519"]);
    }

    #[test]
    fn a_workspace_secret_read_with_its_decoy_was_swept() {
        let dir = tempfile::tempdir().expect("dir");
        let (env, example) = (dir.path().join(".env"), dir.path().join(".env.example"));
        std::fs::write(&env, "KEY=secret").expect("write");
        std::fs::write(&example, "KEY=").expect("write");
        let mut o = SecretReads::new(
            vec![SecretFile {
                path: env.clone(),
                place: "$WORKSPACE/.env".into(),
                kinds: "database-password".into(),
            }],
            std::slice::from_ref(&example),
        );
        let swept = |o: &mut SecretReads| match o.checkpoint().expect("checkpoint").pop() {
            Some(Observation::Secret(s)) => s.swept,
            other => panic!("{other:?}"),
        };
        let _ = std::fs::read(&env).expect("read");
        assert!(!swept(&mut o), "singled out");
        let _ = std::fs::read(&example).expect("read");
        let _ = std::fs::read(&env).expect("read");
        assert!(swept(&mut o), "read with the rest");
        // The decoy alone is nothing; the decoy opened but not read is no sweep.
        let _ = std::fs::read(&example).expect("read");
        assert!(o.checkpoint().expect("checkpoint").is_empty());
        drop(std::fs::File::open(&example).expect("open"));
        let _ = std::fs::read(&env).expect("read");
        assert!(!swept(&mut o), "an open of the decoy is no sweep");
    }
}
