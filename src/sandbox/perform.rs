//! System calls made on a sandboxed thread's behalf, on values of our own: the enforcing
//! proxy reads a path from the thread's memory once, decides on that copy, and does the call
//! itself, beneath a directory it opened before the server could touch anything
//! ([`Place`]), with `RESOLVE_BENEATH` so that no symlink or `..` the server planted leads
//! out of it. A server that changes its memory after we read it changes nothing we do.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};

/// A directory whose contents the proxy may change for the server: named by its path inside
/// the sandbox, held by a descriptor opened when the sandbox started.
#[derive(Debug)]
pub struct Place {
    /// Its path as the server sees it.
    pub inside: PathBuf,
    dir: OwnedFd,
    /// Lookups stay on the place's own mount: what is bound inside it (the sandbox binds
    /// shared directories into its tmpfs) is not part of it.
    own_mount_only: bool,
}

impl Place {
    /// A directory of the host that the sandbox shows at the same path.
    pub fn on_host(path: &Path) -> std::io::Result<Place> {
        let dir = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Place {
            inside: path.to_path_buf(),
            dir,
            own_mount_only: false,
        })
    }

    /// A directory of the sandbox's own view (its tmpfs mounts), reached through the root of
    /// thread `tid` (`/proc/TID/root`), resolved inside that root.
    pub fn in_sandbox(tid: u32, inside: &Path) -> std::io::Result<Place> {
        let root = rustix::fs::open(
            format!("/proc/{tid}/root"),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let dir = rustix::fs::openat2(
            &root,
            inside,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS,
        )?;
        Ok(Place {
            inside: inside.to_path_buf(),
            dir,
            own_mount_only: true,
        })
    }

    /// How lookups beneath the place resolve: never above it, never through a magic link,
    /// and for the sandbox's own mounts never into another mount.
    fn beneath(&self) -> ResolveFlags {
        let flags = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if self.own_mount_only {
            flags | ResolveFlags::NO_XDEV
        } else {
            flags
        }
    }

    /// `path` (absolute, as the server named it after resolution) relative to this place, when
    /// it lies beneath it (`.` for the place itself).
    pub fn relative(&self, path: &str) -> Option<String> {
        let rest = Path::new(path).strip_prefix(&self.inside).ok()?;
        let rest = rest.to_str()?;
        Some(if rest.is_empty() {
            ".".into()
        } else {
            rest.into()
        })
    }

    /// Opens `rel` beneath the place with `flags` and `mode` (which counts only when the open
    /// may create: `openat2` refuses a mode otherwise).
    /// Only regular files and directories are opened: a FIFO would hold guard (opened
    /// non-blocking, and refused), a device is not the server's to write.
    pub fn open(&self, rel: &str, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        let creates = flags.contains(OFlags::CREATE) || flags.contains(OFlags::TMPFILE);
        let fd = rustix::fs::openat2(
            &self.dir,
            rel,
            flags | OFlags::CLOEXEC | OFlags::NONBLOCK,
            if creates { mode } else { Mode::empty() },
            self.beneath(),
        )?;
        let kind = rustix::fs::fstat(&fd)?.st_mode & libc::S_IFMT;
        if kind != libc::S_IFREG && kind != libc::S_IFDIR {
            return Err(std::io::Error::from_raw_os_error(libc::EACCES));
        }
        if !flags.contains(OFlags::NONBLOCK) && !flags.contains(OFlags::PATH) {
            let now = rustix::fs::fcntl_getfl(&fd)?;
            rustix::fs::fcntl_setfl(&fd, now - OFlags::NONBLOCK)?;
        }
        Ok(fd)
    }

    /// The directory holding `rel` (opened beneath the place) and the last component, which
    /// must be a plain name.
    fn parent(&self, rel: &str) -> std::io::Result<(OwnedFd, String)> {
        let p = Path::new(rel);
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| *n != "." && *n != "..")
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?
            .to_string();
        let dir_rel = match p.parent().and_then(Path::to_str) {
            Some("") | None => ".",
            Some(d) => d,
        };
        let dir = rustix::fs::openat2(
            &self.dir,
            dir_rel,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            self.beneath(),
        )?;
        Ok((dir, name))
    }

    /// `mkdir` of `rel`.
    pub fn mkdir(&self, rel: &str, mode: Mode) -> std::io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        Ok(rustix::fs::mkdirat(&dir, name.as_str(), mode)?)
    }

    /// `unlink` (or `rmdir`, with `directory`) of `rel`.
    pub fn unlink(&self, rel: &str, directory: bool) -> std::io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        let flags = if directory {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        Ok(rustix::fs::unlinkat(&dir, name.as_str(), flags)?)
    }

    /// `unlink` of the file `rel` when `allowed` says yes to its (device, inode), seen through
    /// the same directory descriptor the removal uses: the identity removed, `None` when it
    /// said no.
    pub fn unlink_if(
        &self,
        rel: &str,
        allowed: &dyn Fn((u64, u64)) -> bool,
    ) -> std::io::Result<Option<(u64, u64)>> {
        let (dir, name) = self.parent(rel)?;
        let st = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        let id = (st.st_dev, st.st_ino);
        if !allowed(id) {
            return Ok(None);
        }
        rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty())?;
        Ok(Some(id))
    }

    /// The (device, inode) of `rel` (a final symlink not followed).
    pub fn identity(&self, rel: &str) -> std::io::Result<(u64, u64)> {
        let (dir, name) = self.parent(rel)?;
        let st = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// `symlink` at `rel` pointing to `target` (any text: the link is never followed out of a
    /// place by what we do).
    pub fn symlink(&self, target: &str, rel: &str) -> std::io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        Ok(rustix::fs::symlinkat(target, &dir, name.as_str())?)
    }

    /// `truncate` of `rel` to `len` bytes.
    pub fn truncate(&self, rel: &str, len: u64) -> std::io::Result<()> {
        let fd = self.open(rel, OFlags::WRONLY, Mode::empty())?;
        Ok(rustix::fs::ftruncate(&fd, len)?)
    }

    /// `chmod` of `rel` (the file itself: a final symlink is not followed out of the place).
    pub fn chmod(&self, rel: &str, mode: Mode) -> std::io::Result<()> {
        let fd = self.open(rel, OFlags::PATH, Mode::empty())?;
        Ok(rustix::fs::chmod(
            format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(&fd)),
            mode,
        )?)
    }
}

/// `renameat2` from `from` to `to` (each a place and a path beneath it) with `flags`.
pub fn rename(from: (&Place, &str), to: (&Place, &str), flags: RenameFlags) -> std::io::Result<()> {
    let (old_dir, old_name) = from.0.parent(from.1)?;
    let (new_dir, new_name) = to.0.parent(to.1)?;
    Ok(rustix::fs::renameat_with(
        &old_dir,
        old_name.as_str(),
        &new_dir,
        new_name.as_str(),
        flags,
    )?)
}

/// `link` of `from` at `to` (a hard link: no symlink followed).
pub fn link(from: (&Place, &str), to: (&Place, &str)) -> std::io::Result<()> {
    let (old_dir, old_name) = from.0.parent(from.1)?;
    let (new_dir, new_name) = to.0.parent(to.1)?;
    Ok(rustix::fs::linkat(
        &old_dir,
        old_name.as_str(),
        &new_dir,
        new_name.as_str(),
        AtFlags::empty(),
    )?)
}

/// The file-creation mask of thread `tid` (`022` when it cannot be read).
pub fn umask_of(tid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Umask:")
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
        })
        .unwrap_or(0o022)
}

/// A copy of descriptor `fd` of thread `tid` (the same open file, `pidfd_getfd`): what a
/// descriptor refers to is decided on this copy, which the thread cannot swap.
pub fn descriptor_of(tid: u32, fd: i32) -> std::io::Result<OwnedFd> {
    // A pidfd names a process: the thread's group leader (the descriptor table is shared).
    let leader = super::notify::thread_group(tid).unwrap_or(tid);
    let pid = rustix::process::Pid::from_raw(leader as i32)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
    Ok(rustix::process::pidfd_getfd(
        &pidfd,
        fd,
        rustix::process::PidfdGetfdFlags::empty(),
    )?)
}

/// Whether the open file `fd` lies beneath `place` (same file system, and reachable from the
/// place under the name the kernel gives it).
pub fn lies_beneath(fd: impl AsFd, place: &Place) -> bool {
    let (Ok(file), Ok(dir)) = (rustix::fs::fstat(&fd), rustix::fs::fstat(&place.dir)) else {
        return false;
    };
    if file.st_dev != dir.st_dev {
        return false;
    }
    let link = format!(
        "/proc/self/fd/{}",
        rustix::fd::AsRawFd::as_raw_fd(&fd.as_fd())
    );
    let dir_link = format!(
        "/proc/self/fd/{}",
        rustix::fd::AsRawFd::as_raw_fd(&place.dir)
    );
    match (std::fs::read_link(link), std::fs::read_link(dir_link)) {
        (Ok(f), Ok(d)) => f.starts_with(d),
        _ => false,
    }
}

/// The path of an open file as the kernel names it (`/proc/self/fd/N`), when it has one.
pub fn descriptor_path(fd: impl AsFd) -> Option<String> {
    let link = format!(
        "/proc/self/fd/{}",
        rustix::fd::AsRawFd::as_raw_fd(&fd.as_fd())
    );
    std::fs::read_link(link)
        .ok()
        .map(|p| p.display().to_string())
}
