//! The gRPC unix socket, bound safely: its directory is created (0750) when missing, a
//! socket with a live daemon behind it is never taken over (probed by connecting, for a
//! few seconds: a daemon killed a moment ago still accepts connections while it exits), a
//! stale one is replaced, anything else at the path is refused, and the socket appears at
//! its path already with mode 0660 (bound in a private directory, then renamed into place).

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// The socket's mode: the daemon's user and group may connect, nobody else.
pub const SOCKET_MODE: u32 = 0o660;
/// The mode of a socket directory the daemon creates, whatever the umask.
pub const DIR_MODE: u32 = 0o750;
/// How long a socket that still accepts connections is probed before it counts as a live
/// daemon's. A daemon killed with SIGKILL keeps its listening socket until the kernel has
/// torn the process down, which took up to 2.2 s for a large one (issue #32 item 4).
pub const LIVE_PROBE: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The socket's directory is missing and cannot be created.
    #[error(
        "cannot create {dir}, the directory of the socket {path}: {source}; create it \
         writable by this user (under systemd: RuntimeDirectory=curio) or pass --listen"
    )]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A daemon answers on the socket.
    #[error("another daemon is listening on {0}; stop it or pass another --listen")]
    InUse(PathBuf),
    /// Something other than a socket is at the path.
    #[error("{0} exists and is not a socket; remove it or pass another --listen")]
    NotASocket(PathBuf),
    /// Binding, setting the mode or renaming failed.
    #[error("binding {path}: {source}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Binds the gRPC socket at `path`.
///
/// # Errors
/// [`SocketError`] naming the path and what to do.
pub async fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    let bind_err = |source| SocketError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir_err = |source| SocketError::Directory {
        dir: dir.clone(),
        path: path.to_path_buf(),
        source,
    };
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&dir)
            .map_err(dir_err)?;
        // DirBuilder's mode passes through the umask (0027 would still give 0750, but
        // 077 gives 0700 and Curio's group could not reach the socket): set it outright.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(DIR_MODE))
            .map_err(dir_err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(SocketError::NotASocket(path.to_path_buf()))
        }
        Ok(_) => {
            let deadline = tokio::time::Instant::now() + LIVE_PROBE;
            loop {
                match tokio::net::UnixStream::connect(path).await {
                    Ok(_) if tokio::time::Instant::now() >= deadline => {
                        return Err(SocketError::InUse(path.to_path_buf()))
                    }
                    // Maybe a daemon that is exiting: ask again shortly.
                    Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                    // Only a refused connection proves that nobody listens.
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        tracing::info!(path = %path.display(), "replacing a stale socket (no daemon behind it)");
                        break;
                    }
                    Err(e) => return Err(bind_err(e)),
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    // Bound in a directory only this user can enter, the socket is never reachable with
    // the umask's mode; the rename then replaces a stale socket atomically.
    // One per call: daemons started at once in one process (tests, an embedding program)
    // must not share it, or one removes the other's while it binds.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let private = dir.join(format!(".cuzk-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(bind_err)?;
    let staged = private.join("s");
    let bound = (|| {
        let listener = UnixListener::bind(&staged)?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(SOCKET_MODE))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound.map_err(bind_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cuzk-sock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[tokio::test]
    async fn socket_is_created_0660_in_a_new_directory() {
        let dir = scratch("mode");
        let path = dir.join("sub").join("c.sock");
        let _listener = bind(&path).await.expect("binds");
        let meta = std::fs::symlink_metadata(&path).expect("socket exists");
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.mode() & 0o777, SOCKET_MODE);
        // See: #32 item 6.
        let dir_meta = std::fs::metadata(dir.join("sub")).expect("directory exists");
        assert_eq!(dir_meta.mode() & 0o777, DIR_MODE);
        let leftovers: Vec<_> = std::fs::read_dir(dir.join("sub")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "only the socket remains: {leftovers:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn live_socket_is_refused_and_stale_one_replaced() {
        let dir = scratch("live");
        let path = dir.join("c.sock");
        let live = bind(&path).await.expect("binds");
        let err = bind(&path).await.unwrap_err();
        assert!(matches!(err, SocketError::InUse(_)), "{err}");
        drop(live);
        // The file stays behind with nobody listening: stale.
        assert!(path.exists());
        let _again = bind(&path).await.expect("stale socket replaced");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_file_at_the_path_or_an_impossible_directory_is_refused() {
        let dir = scratch("file");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.sock");
        std::fs::write(&path, b"not a socket").unwrap();
        let err = bind(&path).await.unwrap_err();
        assert!(matches!(err, SocketError::NotASocket(_)), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
        let err = bind(&path.join("under-a-file.sock")).await.unwrap_err();
        assert!(matches!(err, SocketError::Directory { .. }), "{err}");
        assert!(err.to_string().contains("RuntimeDirectory"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
