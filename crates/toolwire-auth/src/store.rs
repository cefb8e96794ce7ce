//! Where registrations and tokens are kept: the [`CredentialStore`] trait, an in-memory store
//! and a file store. Entries are keyed by the MCP server's URL **and** the issuer, so a server
//! that moves to another authorization server gets a new registration and never sees the old
//! server's client id.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use toolwire_http::BoxFuture;

use crate::AuthError;
use crate::client_auth::TokenAuthMethod;
use crate::secret::Secret;
use crate::token::Tokens;

/// What an entry is kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreKey {
    /// The MCP server's URL, as configured.
    pub server: String,
    /// The authorization server's issuer, as its metadata spell it.
    pub issuer: String,
}

/// How the client got its identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// Dynamic client registration (RFC 7591).
    Registered,
    /// A client ID metadata document URL.
    MetadataDocument,
    /// Configured by the user (kept with the tokens it obtained, so they can be refreshed by
    /// a process that is not given the configuration again).
    Static,
}

/// A client identity at one authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRegistration {
    /// The client id.
    pub client_id: String,
    /// The client secret, for confidential clients.
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// How it authenticates at the token endpoint.
    pub auth_method: TokenAuthMethod,
    /// The redirect URI it was registered with (a loopback listener binds its port again).
    #[serde(default)]
    pub redirect_uri: Option<String>,
    /// Where the identity came from.
    pub kind: ClientKind,
}

/// One stored entry: a server, an issuer, the client and its tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAuth {
    /// The MCP server's URL.
    pub server: String,
    /// The issuer.
    pub issuer: String,
    /// The RFC 8707 resource sent with every authorization and token request.
    pub resource: String,
    /// The token endpoint, so tokens refresh without discovery.
    pub token_endpoint: String,
    /// The revocation endpoint, if the server has one.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The client identity.
    #[serde(default)]
    pub client: Option<ClientRegistration>,
    /// The tokens.
    #[serde(default)]
    pub tokens: Option<Tokens>,
    /// The DPoP key the tokens are bound to (base64url PKCS#8), if they are.
    #[serde(default)]
    pub dpop_key: Option<Secret>,
    /// When it was saved, seconds since the epoch.
    #[serde(default)]
    pub saved_at: u64,
}

impl StoredAuth {
    /// Its key.
    pub fn key(&self) -> StoreKey {
        StoreKey {
            server: self.server.clone(),
            issuer: self.issuer.clone(),
        }
    }
}

/// Held while one process refreshes or replaces an entry, so another does not spend the same
/// rotating refresh token; released on drop.
pub struct StoreLock(
    #[allow(dead_code, reason = "held for its Drop")] Option<Box<dyn Send + Sync>>,
);

impl fmt::Debug for StoreLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StoreLock")
    }
}

impl StoreLock {
    /// A lock that holds nothing (stores within one process need none: the client
    /// serialises its own refreshes).
    pub fn none() -> Self {
        Self(None)
    }

    /// A lock that holds `guard` until it is dropped (a store shared by several processes
    /// releases its lock in the guard's `Drop`).
    pub fn holding(guard: impl Send + Sync + 'static) -> Self {
        Self(Some(Box::new(guard)))
    }
}

/// Keeps registrations and tokens. Implement it to keep them in a keychain or a database.
pub trait CredentialStore: Send + Sync + fmt::Debug + 'static {
    /// The entry for `key`, if any.
    fn load<'a>(
        &'a self,
        key: &'a StoreKey,
    ) -> BoxFuture<'a, Result<Option<StoredAuth>, AuthError>>;
    /// Saves `entry` under its key, replacing what was there.
    fn save<'a>(&'a self, entry: &'a StoredAuth) -> BoxFuture<'a, Result<(), AuthError>>;
    /// Removes the entry for `key`.
    fn remove<'a>(&'a self, key: &'a StoreKey) -> BoxFuture<'a, Result<(), AuthError>>;
    /// Every entry.
    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredAuth>, AuthError>>;
    /// Excludes other processes from the store until the lock is dropped.
    fn lock(&self) -> BoxFuture<'_, Result<StoreLock, AuthError>> {
        Box::pin(async { Ok(StoreLock::none()) })
    }
}

/// Entries in memory, gone with the process.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    entries: Arc<Mutex<Vec<StoredAuth>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<StoredAuth>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn upsert(entries: &mut Vec<StoredAuth>, entry: &StoredAuth) {
    match entries
        .iter_mut()
        .find(|e| e.server == entry.server && e.issuer == entry.issuer)
    {
        Some(e) => *e = entry.clone(),
        None => entries.push(entry.clone()),
    }
}

impl CredentialStore for MemoryStore {
    fn load<'a>(
        &'a self,
        key: &'a StoreKey,
    ) -> BoxFuture<'a, Result<Option<StoredAuth>, AuthError>> {
        let found = self
            .entries()
            .iter()
            .find(|e| e.server == key.server && e.issuer == key.issuer)
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn save<'a>(&'a self, entry: &'a StoredAuth) -> BoxFuture<'a, Result<(), AuthError>> {
        upsert(&mut self.entries(), entry);
        Box::pin(async { Ok(()) })
    }

    fn remove<'a>(&'a self, key: &'a StoreKey) -> BoxFuture<'a, Result<(), AuthError>> {
        self.entries()
            .retain(|e| !(e.server == key.server && e.issuer == key.issuer));
        Box::pin(async { Ok(()) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredAuth>, AuthError>> {
        let all = self.entries().clone();
        Box::pin(async move { Ok(all) })
    }
}

/// Entries in one JSON file: created `0600` in a `0700` directory, written whole to a
/// temporary file that is synced and renamed over it (a crash leaves the old file or the new,
/// never half of one), and locked (`flock` on a `.lock` beside it) while a process refreshes.
/// A file others can read is made private again, with a warning.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct FileFormat {
    version: u32,
    #[serde(default)]
    entries: Vec<StoredAuth>,
}

impl FileStore {
    /// A store in `path` (created on the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `$TOOLWIRE_CREDENTIALS`, else `$XDG_STATE_HOME/toolwire/credentials.json`, else
    /// `~/.local/state/toolwire/credentials.json`.
    pub fn default_location() -> Result<Self, AuthError> {
        if let Some(p) = std::env::var_os("TOOLWIRE_CREDENTIALS").filter(|p| !p.is_empty()) {
            return Ok(Self::new(p));
        }
        let dir = Self::state_dir().ok_or_else(|| {
            AuthError::store(
                "no HOME to keep credentials in; set TOOLWIRE_CREDENTIALS",
                None,
            )
        })?;
        Ok(Self::new(dir.join("credentials.json")))
    }

    /// Where Toolwire keeps its state for this user: `$XDG_STATE_HOME/toolwire`, else
    /// `~/.local/state/toolwire`; `None` without a home directory.
    pub fn state_dir() -> Option<PathBuf> {
        std::env::var_os("XDG_STATE_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
            })
            .map(|state| state.join("toolwire"))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(path: &Path) -> Result<Vec<StoredAuth>, AuthError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(store_error(path, e)),
        };
        private(path)?;
        let file: FileFormat = serde_json::from_str(&text).map_err(|e| {
            AuthError::store(
                format!("{} is not a credentials file", path.display()),
                Some(Box::new(e)),
            )
        })?;
        Ok(file.entries)
    }

    fn write(path: &Path, entries: Vec<StoredAuth>) -> Result<(), AuthError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir)?;
        let text = serde_json::to_string_pretty(&FileFormat {
            version: 1,
            entries,
        })
        .map_err(|e| AuthError::store("the credentials could not be written", Some(Box::new(e))))?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("credentials.json");
        // A unique name, created exclusively (0600 on Unix), then renamed over the file: a
        // reader sees the old file or the new one, never half of either.
        let written = (|| {
            let mut temp = tempfile::Builder::new()
                .prefix(&format!(".{name}."))
                .suffix(".tmp")
                .tempfile_in(dir)?;
            temp.write_all(text.as_bytes())?;
            temp.as_file().sync_all()?;
            temp.persist(path).map_err(|e| e.error)?;
            Ok::<_, std::io::Error>(())
        })();
        written.map_err(|e| store_error(path, e))
    }

    /// Reads, changes and writes the entries, one such change at a time in this process
    /// (across processes, callers hold [`CredentialStore::lock`]).
    fn update(
        path: &Path,
        change: impl FnOnce(&mut Vec<StoredAuth>) -> bool,
    ) -> Result<(), AuthError> {
        static WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = WRITES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut entries = Self::read(path)?;
        if change(&mut entries) {
            Self::write(path, entries)?;
        }
        Ok(())
    }

    /// Runs `f` on the entries off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Path) -> Result<T, AuthError> + Send + 'static,
    ) -> Result<T, AuthError> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || f(&path))
            .await
            .map_err(|e| {
                AuthError::store("the credentials could not be written", Some(Box::new(e)))
            })?
    }
}

fn store_error(path: &Path, e: std::io::Error) -> AuthError {
    AuthError::store(path.display().to_string(), Some(Box::new(e)))
}

/// Creates the directory 0700; one that exists and others may enter is reported (its owner
/// chose that, and it may hold other things: it is not changed).
#[cfg(unix)]
fn create_private_dir(dir: &Path) -> Result<(), AuthError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::metadata(dir) {
        Ok(meta) => {
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    mode = format_args!("{:o}", mode & 0o777),
                    "the credentials directory is open to other users; make it 0700"
                );
            }
            Ok(())
        }
        Err(_) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| store_error(dir, e)),
    }
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> Result<(), AuthError> {
    std::fs::create_dir_all(dir).map_err(|e| store_error(dir, e))
}

/// Opens (creating it 0600) the lock file, never through a symlink and never truncating it.
#[cfg(unix)]
fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

/// Makes a credentials file that others may read private again, loudly.
#[cfg(unix)]
fn private(path: &Path) -> Result<(), AuthError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| store_error(path, e))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format_args!("{:o}", mode & 0o777),
            "the credentials file was readable by others; made it 0600 (its tokens may have been seen: log in again to be sure)"
        );
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| store_error(path, e))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn private(_: &Path) -> Result<(), AuthError> {
    Ok(())
}

impl CredentialStore for FileStore {
    fn load<'a>(
        &'a self,
        key: &'a StoreKey,
    ) -> BoxFuture<'a, Result<Option<StoredAuth>, AuthError>> {
        let key = key.clone();
        Box::pin(self.blocking(move |path| {
            Ok(Self::read(path)?
                .into_iter()
                .find(|e| e.server == key.server && e.issuer == key.issuer))
        }))
    }

    fn save<'a>(&'a self, entry: &'a StoredAuth) -> BoxFuture<'a, Result<(), AuthError>> {
        let entry = entry.clone();
        Box::pin(self.blocking(move |path| {
            Self::update(path, |entries| {
                upsert(entries, &entry);
                true
            })
        }))
    }

    fn remove<'a>(&'a self, key: &'a StoreKey) -> BoxFuture<'a, Result<(), AuthError>> {
        let key = key.clone();
        Box::pin(self.blocking(move |path| {
            Self::update(path, |entries| {
                let before = entries.len();
                entries.retain(|e| !(e.server == key.server && e.issuer == key.issuer));
                entries.len() != before
            })
        }))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredAuth>, AuthError>> {
        Box::pin(self.blocking(Self::read))
    }

    #[cfg(unix)]
    fn lock(&self) -> BoxFuture<'_, Result<StoreLock, AuthError>> {
        Box::pin(self.blocking(|path| {
            let dir = path.parent().unwrap_or(Path::new("."));
            create_private_dir(dir)?;
            let mut name = path.as_os_str().to_owned();
            name.push(".lock");
            let lock_path = PathBuf::from(name);
            let file = open_lock_file(&lock_path).map_err(|e| store_error(&lock_path, e))?;
            let held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(
                |(_, e)| AuthError::store(lock_path.display().to_string(), Some(Box::new(e))),
            )?;
            Ok(StoreLock(Some(Box::new(held))))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn entry(server: &str, issuer: &str, token: &str) -> StoredAuth {
        StoredAuth {
            server: server.into(),
            issuer: issuer.into(),
            resource: server.into(),
            token_endpoint: format!("{issuer}/token"),
            revocation_endpoint: None,
            client: Some(ClientRegistration {
                client_id: "id".into(),
                client_secret: Some(Secret::new("client-secret-value")),
                auth_method: TokenAuthMethod::ClientSecretPost,
                redirect_uri: Some("http://127.0.0.1:5/callback".into()),
                kind: ClientKind::Registered,
            }),
            tokens: Some(Tokens {
                access_token: Secret::new(token),
                token_type: "Bearer".into(),
                refresh_token: Some(Secret::new("refresh-value")),
                expires_at: Some(10),
                issued_at: 5,
                scope: Some("a".into()),
                requested_scope: Some("a".into()),
            }),
            dpop_key: None,
            saved_at: 1,
        }
    }

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("toolwire-auth-{name}-{}", std::process::id()))
    }

    #[tokio::test]
    async fn entries_are_kept_per_server_and_issuer() {
        let store = MemoryStore::new();
        store.save(&entry("s", "as1", "t1")).await.expect("save");
        store.save(&entry("s", "as2", "t2")).await.expect("save");
        store.save(&entry("s", "as1", "t3")).await.expect("save");
        let key = StoreKey {
            server: "s".into(),
            issuer: "as1".into(),
        };
        let got = store.load(&key).await.expect("load").expect("entry");
        assert_eq!(got.tokens.map(|t| t.access_token), Some(Secret::new("t3")));
        assert_eq!(store.list().await.expect("list").len(), 2);
        store.remove(&key).await.expect("remove");
        assert!(store.load(&key).await.expect("load").is_none());
        assert!(!format!("{store:?}").contains("client-secret-value"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_file_is_private_written_whole_and_repaired_when_others_can_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp("file");
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("nested").join("credentials.json");
        let store = FileStore::new(&path);
        let key = StoreKey {
            server: "s".into(),
            issuer: "as1".into(),
        };
        assert!(store.load(&key).await.expect("no file yet").is_none());
        store.save(&entry("s", "as1", "t1")).await.expect("save");
        store.save(&entry("s", "as2", "t2")).await.expect("save");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("dir")), 0o700);
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "no temporary file is left behind");
        let reopened = FileStore::new(&path);
        assert_eq!(reopened.list().await.expect("list").len(), 2);
        assert_eq!(
            reopened.load(&key).await.expect("load"),
            Some(entry("s", "as1", "t1"))
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(reopened.load(&key).await.expect("load").is_some());
        assert_eq!(mode(&path), 0o600, "a readable file is made private again");
        reopened.remove(&key).await.expect("remove");
        assert_eq!(reopened.list().await.expect("list").len(), 1);
        std::fs::write(&path, "not json").expect("write");
        assert!(matches!(
            reopened.list().await,
            Err(AuthError::Store { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_lock_excludes_a_second_holder_until_dropped() {
        let dir = temp("lock");
        let _ = std::fs::remove_dir_all(&dir);
        let store = FileStore::new(dir.join("credentials.json"));
        let held = store.lock().await.expect("lock");
        let second = store.clone();
        let waiter = tokio::spawn(async move { second.lock().await.map(drop) });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(
            !waiter.is_finished(),
            "a second lock waits while the first is held"
        );
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .expect("the second lock is granted once the first is dropped")
            .expect("join")
            .expect("lock");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn sixteen_concurrent_saves_in_one_process_leave_a_valid_file_with_every_entry() {
        let dir = temp("concurrent");
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("credentials.json");
        let saves: Vec<_> = (0..16)
            .map(|i| {
                // Separate stores on one file, as a host authorising many servers has.
                let store = FileStore::new(&path);
                tokio::spawn(async move {
                    store
                        .save(&entry(&format!("server-{i}"), "as", &format!("t{i}")))
                        .await
                })
            })
            .collect();
        for save in saves {
            save.await.expect("join").expect("save");
        }
        let mut servers: Vec<String> = FileStore::new(&path)
            .list()
            .await
            .expect("the file parses")
            .into_iter()
            .map(|e| e.server)
            .collect();
        servers.sort();
        let mut expected: Vec<String> = (0..16).map(|i| format!("server-{i}")).collect();
        expected.sort();
        assert_eq!(servers, expected, "no save was lost");
        let leftovers = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .count();
        assert_eq!(leftovers, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_planted_symlink_is_never_written_through() {
        let dir = temp("symlink");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let victim = dir.join("victim");
        std::fs::write(&victim, "untouched").expect("write");
        let path = dir.join("credentials.json");
        std::os::unix::fs::symlink(&victim, dir.join("credentials.json.lock")).expect("symlink");
        let store = FileStore::new(&path);
        assert!(
            matches!(store.lock().await, Err(AuthError::Store { .. })),
            "the lock file is not opened through a symlink"
        );
        store.save(&entry("s", "as", "t")).await.expect("save");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "untouched");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_credentials_directory_open_to_others_is_reported() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp("wide");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let (logs, _guard) = toolwire_test_support::logs::capture();
        create_private_dir(&dir).expect("an existing directory is used");
        assert!(
            logs.text().contains("open to other users"),
            "{}",
            logs.text()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
