//! Small file-system habits: bounded reads of regular files only, private
//! directories, atomic writes that follow no planted link.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};

use rustix::fs::FileType;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It does not exist.
    #[error("does not exist")]
    NotFound,
    /// It is a FIFO, a device, a directory, a socket or a symbolic link.
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// It holds more than the limit.
    #[error("is {size} bytes, more than the {limit} bytes allowed")]
    TooLarge {
        /// Its size (at least this much, when it grew while being read).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Any other failure.
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            ErrorKind::NotFound => ReadError::NotFound,
            _ if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                ReadError::NotRegular("a symlink")
            }
            _ => ReadError::Io(e),
        }
    }
}

/// The flags every bounded open uses: opening a FIFO must not wait for a
/// writer (the type check below then refuses it).
fn nonblocking() -> i32 {
    // The flag's bits fit an i32 on every Linux target.
    i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0)
}

/// Reads the regular file at `path` (symbolic links to one are followed: a
/// Kubernetes secret is one), refusing FIFOs, devices and directories before
/// reading a byte, and anything larger than `limit` bytes.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    // Look before opening (opening a device can act); the open file is
    // checked again, against a swap.
    let meta = std::fs::metadata(path)?;
    check_regular(FileType::from_raw_mode(meta.mode()))?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking())
        .open(path)?;
    read_open_file(file, limit)
}

/// Reads an opened file if it is a regular file of at most `limit` bytes.
pub fn read_open_file(file: File, limit: u64) -> Result<Vec<u8>, ReadError> {
    let stat = rustix::fs::fstat(&file).map_err(|e| ReadError::from(std::io::Error::from(e)))?;
    check_regular(FileType::from_raw_mode(stat.st_mode))?;
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > limit {
        return Err(ReadError::TooLarge { size, limit });
    }
    read_bounded(file, limit)
}

/// Refuses every file type but a regular file, naming it.
pub fn check_regular(kind: FileType) -> Result<(), ReadError> {
    Err(ReadError::NotRegular(match kind {
        FileType::RegularFile => return Ok(()),
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Directory => "a directory",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Socket => "a socket",
        FileType::Unknown => "a special file",
    }))
}

/// Reads at most `limit` bytes from `reader`; more is an error, not a cut.
pub fn read_bounded(reader: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    let size = bytes.len() as u64;
    if size > limit {
        return Err(ReadError::TooLarge { size, limit });
    }
    Ok(bytes)
}

/// Creates `dir` and its parents; directories created here are 0700.
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Why a directory is not private to this user ([`check_private_dir`]).
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    /// Its metadata cannot be read.
    #[error("cannot inspect it: {0}")]
    Inspect(std::io::Error),
    /// Another user owns it.
    #[error("it is owned by uid {owner}, not by this user (uid {me}); use a directory of your own")]
    Owner {
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Its group or others may write in it.
    #[error("it is writable by others (mode {mode:o}); use a private directory (chmod 700)")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
}

/// Fails unless `dir` belongs to this user and no one else may write in it:
/// in a directory others can write, they could plant links or swap files.
pub(crate) fn check_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    let meta = std::fs::metadata(dir).map_err(PrivateDirError::Inspect)?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(PrivateDirError::Owner {
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(PrivateDirError::Writable {
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(())
}

/// Writes `bytes` to `path` (mode 0600) through a new temporary file in the
/// same directory (created exclusively under a random name, so a planted link
/// is never followed) renamed into place: a reader sees the old file or the
/// whole new one, never half.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Opens (creating it if needed, mode 0600) a file that must not be a link:
/// for lock files beside state that others could try to redirect.
pub(crate) fn open_nofollow_for_lock(path: &Path) -> std::io::Result<File> {
    let nofollow = i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0);
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nofollow)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_fifos_devices_directories_and_oversized_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).expect("mkfifo");
        assert!(matches!(
            read_regular_file(&fifo, 10),
            Err(ReadError::NotRegular("a FIFO"))
        ));
        assert!(matches!(
            read_regular_file(Path::new("/dev/zero"), 10),
            Err(ReadError::NotRegular("a device"))
        ));
        assert!(matches!(
            read_regular_file(dir.path(), 10),
            Err(ReadError::NotRegular("a directory"))
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, [7u8; 11]).expect("write");
        assert!(matches!(
            read_regular_file(&big, 10),
            Err(ReadError::TooLarge {
                size: 11,
                limit: 10
            })
        ));
        assert_eq!(read_regular_file(&big, 11).expect("fits"), [7u8; 11]);
        assert!(matches!(
            read_regular_file(&dir.path().join("none"), 10),
            Err(ReadError::NotFound)
        ));
        assert!(matches!(
            read_bounded(std::io::repeat(0), 1000),
            Err(ReadError::TooLarge { size: 1001, .. })
        ));
    }

    #[test]
    fn atomic_writes_do_not_follow_planted_links() {
        let dir = tempfile::tempdir().expect("temp dir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let target = dir.path().join("state.json");
        // Every name a predictable writer might use.
        for planted in ["state.tmp", "state.json.tmp"] {
            std::os::unix::fs::symlink(&victim, dir.path().join(planted)).expect("symlink");
        }
        write_atomically(&target, b"new").expect("write");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"precious");
        assert_eq!(std::fs::read(&target).expect("target"), b"new");

        let link = dir.path().join("state.lock");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        assert!(open_nofollow_for_lock(&link).is_err());
        assert_eq!(std::fs::read(&victim).expect("victim"), b"precious");
    }

    #[test]
    fn private_dirs_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        assert!(check_private_dir(dir.path()).is_ok());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777))
            .expect("chmod");
        let err = check_private_dir(dir.path()).expect_err("world-writable");
        assert!(matches!(err, PrivateDirError::Writable { .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("writable by others"), "{err}");
    }
}
