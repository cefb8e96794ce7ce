//! The vault: where the gateway keeps its callers' logins to per-user upstreams, sealed.
//!
//! Each caller's logins are one record, named by a hash of the caller's principal and sealed
//! with AES-256-GCM under the vault's key (the record's name is the associated data, so a
//! record copied under another caller's name does not open). Records live in a directory on
//! one machine (a `0600` file each, replaced whole) or in Redis, which every replica of a
//! fleet reaches: a login made through one replica is used by all. With Redis, a refresh takes
//! a lock there (so two replicas never spend one rotating refresh token), and a sign-in's
//! callback that reaches another replica than the one waiting for it is handed over on a
//! Redis channel, sealed like the records.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::Deserialize;
use toolwire::auth::{AuthError, CredentialStore, Secret, StoreKey, StoreLock, StoredAuth};

use super::AccessError;

/// The environment variable the vault's key is read from unless the file says another.
pub const VAULT_KEY_ENV: &str = "TOOLWIRE_VAULT_KEY";

/// How long a refresh may hold a record's lock in Redis before it lapses on its own.
const LOCK_LEASE: Duration = Duration::from_secs(30);

/// How long a refresh waits for a record's lock.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How long one write of a record may hold its write lease in Redis.
const WRITE_LEASE: Duration = Duration::from_secs(5);

/// Where the vault keeps its records, and its key.
// tidy: not an MCP shape
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VaultConfig {
    /// A directory on this machine: a sealed file per caller (`0600`, the directory `0700`).
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// A Redis server every replica reaches (`redis://[user:password@]host:6379/0`).
    #[serde(default)]
    pub redis: Option<String>,
    /// The environment variable that holds the key: base64 of 32 random bytes
    /// (`head -c32 /dev/urandom | base64`), the same on every replica. Default
    /// [`VAULT_KEY_ENV`].
    #[serde(default)]
    pub key_env: Option<String>,
    /// A file that holds the key instead (a mounted secret, as Kubernetes and Compose give
    /// them); it wins over the variable. It should be readable by its owner only.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The key itself, for a program that has it at hand (never read from the file).
    #[serde(skip)]
    pub key: Option<Secret>,
}

impl std::fmt::Debug for VaultConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultConfig")
            .field("dir", &self.dir)
            .field(
                "redis",
                &self.redis.as_deref().map(toolwire_types::redacted_url),
            )
            .field("key_env", &self.key_env)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

/// `"vault": "/dir"` (a directory) or `"vault": {…}`.
pub(crate) fn deserialize<'de, D>(deserializer: D) -> Result<Option<VaultConfig>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    // tidy: not an MCP shape
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Dir(PathBuf),
        Full(VaultConfig),
    }
    Ok(
        Option::<Form>::deserialize(deserializer)?.map(|form| match form {
            Form::Dir(dir) => VaultConfig {
                dir: Some(dir),
                ..VaultConfig::default()
            },
            Form::Full(config) => config,
        }),
    )
}

/// Seals and opens records.
struct Sealer {
    key: LessSafeKey,
    rng: SystemRandom,
}

/// The prefix of every sealed text: the format's version.
const SEALED: &str = "tw1.";

impl Sealer {
    fn new(key: &[u8]) -> Result<Self, AccessError> {
        let key = UnboundKey::new(&AES_256_GCM, key)
            .map_err(|_| AccessError::Config("the vault's key must be 32 bytes".into()))?;
        Ok(Self {
            key: LessSafeKey::new(key),
            rng: SystemRandom::new(),
        })
    }

    /// `plain` sealed for `name`: `tw1.` and the base64 of the nonce, ciphertext and tag.
    fn seal(&self, name: &str, plain: &[u8]) -> Result<String, AuthError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| AuthError::store("no randomness to seal the vault's record", None))?;
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(name).as_bytes()),
                &mut sealed,
            )
            .map_err(|_| AuthError::store("the vault's record could not be sealed", None))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(format!("{SEALED}{}", STANDARD.encode(out)))
    }

    /// The plain text of a record sealed for `name`; an error if it was sealed for another
    /// name, with another key, or changed.
    fn open(&self, name: &str, text: &str) -> Result<Vec<u8>, AuthError> {
        let refused = || {
            AuthError::store(
                "a vault record does not open with this key (another key, another caller's, or changed)",
                None,
            )
        };
        let bytes = text
            .trim()
            .strip_prefix(SEALED)
            .and_then(|b| STANDARD.decode(b).ok())
            .ok_or_else(refused)?;
        if bytes.len() < NONCE_LEN {
            return Err(refused());
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| refused())?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad(name).as_bytes()), &mut sealed)
            .map_err(|_| refused())?;
        Ok(plain.to_vec())
    }
}

fn aad(name: &str) -> String {
    format!("toolwire-vault/{name}")
}

/// Where records live.
enum Backend {
    Dir(PathBuf),
    Redis(Redis),
}

/// A Redis server: one reconnecting connection, made on first use.
struct Redis {
    client: redis::Client,
    connection: tokio::sync::OnceCell<redis::aio::ConnectionManager>,
}

/// Keys in Redis begin with this.
const PREFIX: &str = "toolwire:vault:";

/// The channel sign-in callbacks are handed over on.
pub(crate) const CALLBACKS: &str = "toolwire:vault:callbacks";

impl Redis {
    /// Takes `key` for `lease` (waiting up to [`LOCK_WAIT`] for another holder to let go);
    /// released when the returned lease drops.
    async fn lease(&self, key: String, lease: Duration) -> Result<Lease, AuthError> {
        let mut connection = self.connection().await?;
        let token = toolwire_server::random_id();
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            let taken: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX))
                .query_async(&mut connection)
                .await
                .map_err(redis_error)?;
            if taken.is_some() {
                return Ok(Lease {
                    connection,
                    key,
                    token,
                });
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(AuthError::store(
                    "another replica holds this login's lock",
                    None,
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn connection(&self) -> Result<redis::aio::ConnectionManager, AuthError> {
        self.connection
            .get_or_try_init(|| self.client.get_connection_manager())
            .await
            .cloned()
            .map_err(redis_error)
    }
}

/// A Redis failure, without the server's address (its URL may hold a password).
fn redis_error(e: redis::RedisError) -> AuthError {
    AuthError::store(format!("the vault's Redis: {:?}", e.kind()), None)
}

/// The vault: its records' backend and its key.
pub(crate) struct Vault {
    backend: Backend,
    sealer: Sealer,
    /// The key sign-in links and their browsers are bound with (derived from the vault's,
    /// so every replica holds it).
    binder: ring::hmac::Key,
    /// One writer of records at a time in this process.
    writing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.backend {
            Backend::Dir(_) => "Vault(dir)",
            Backend::Redis(_) => "Vault(redis)",
        })
    }
}

/// The vault's key from `file` (its text never reaches an error); a warning when others may
/// read it.
fn read_key_file(file: &std::path::Path) -> Result<String, AccessError> {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(file) {
        use std::os::unix::fs::PermissionsExt as _;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(file = %file.display(), "the vault's key file can be read by other users: chmod 600 it");
        }
    }
    std::fs::read_to_string(file)
        .map_err(|e| AccessError::Config(format!("the vault's key file {}: {e}", file.display())))
}

impl Vault {
    /// The vault `config` describes, its key read now.
    pub(crate) fn new(config: &VaultConfig) -> Result<Self, AccessError> {
        let env = config.key_env.as_deref().unwrap_or(VAULT_KEY_ENV);
        // Where the key came from, for errors (never the key).
        let (key, source) = match (&config.key, &config.key_file) {
            (Some(key), _) => (key.expose().to_owned(), env.to_owned()),
            (None, Some(file)) => (read_key_file(file)?, file.display().to_string()),
            (None, None) => (
                std::env::var(env).map_err(|_| {
                    AccessError::Config(format!(
                        "the vault is sealed with a key: set {env} to the base64 of 32 random bytes (`head -c32 /dev/urandom | base64`), the same on every replica, or name a file that holds it (\"keyFile\")"
                    ))
                })?,
                env.to_owned(),
            ),
        };
        let key = STANDARD.decode(key.trim()).map_err(|_| {
            AccessError::Config(format!(
                "the vault's key ({source}) is not base64 of 32 bytes"
            ))
        })?;
        if key.len() != 32 {
            return Err(AccessError::Config(format!(
                "the vault's key ({source}) is not base64 of 32 bytes"
            )));
        }
        let backend = match (&config.dir, &config.redis) {
            (Some(dir), None) => Backend::Dir(dir.clone()),
            (None, Some(url)) => {
                let client = redis::Client::open(url.as_str()).map_err(|e| {
                    AccessError::Config(format!(
                        "vault.redis {}: {:?}",
                        toolwire_types::redacted_url(url),
                        e.kind()
                    ))
                })?;
                Backend::Redis(Redis {
                    client,
                    connection: tokio::sync::OnceCell::new(),
                })
            }
            _ => {
                return Err(AccessError::Config(
                    "the vault is a directory (\"dir\") or a Redis server (\"redis\"): one of them"
                        .into(),
                ));
            }
        };
        // Its own key, derived from the vault's: never the sealing key itself.
        let derived = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
            b"toolwire-sign-in-binding-v1",
        );
        Ok(Self {
            backend,
            sealer: Sealer::new(&key)?,
            binder: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref()),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    /// The key sign-in links are bound with, the same on every replica of this vault.
    pub(crate) fn binder(&self) -> ring::hmac::Key {
        self.binder.clone()
    }

    /// Whether other replicas share it (and may make or use a login for this one).
    pub(crate) fn shared(&self) -> bool {
        matches!(self.backend, Backend::Redis(_))
    }

    /// The store of `principal`'s logins.
    pub(crate) fn store(self: &Arc<Self>, principal: &str) -> Arc<dyn CredentialStore> {
        Arc::new(CallerStore {
            vault: self.clone(),
            name: hashed(principal),
        })
    }

    async fn read(&self, name: &str) -> Result<Vec<StoredAuth>, AuthError> {
        let sealed = match &self.backend {
            Backend::Dir(dir) => match std::fs::read_to_string(record_path(dir, name)) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(AuthError::store(
                        "a vault record could not be read",
                        Some(Box::new(e)),
                    ));
                }
            },
            Backend::Redis(redis) => {
                let mut connection = redis.connection().await?;
                redis::cmd("GET")
                    .arg(format!("{PREFIX}{name}"))
                    .query_async::<Option<String>>(&mut connection)
                    .await
                    .map_err(redis_error)?
            }
        };
        let Some(sealed) = sealed else {
            return Ok(Vec::new());
        };
        let plain = self.sealer.open(name, &sealed)?;
        serde_json::from_slice(&plain)
            .map_err(|e| AuthError::store("a vault record does not decode", Some(Box::new(e))))
    }

    async fn write(&self, name: &str, entries: &[StoredAuth]) -> Result<(), AuthError> {
        let plain = serde_json::to_vec(entries).map_err(|e| {
            AuthError::store("a vault record could not be written", Some(Box::new(e)))
        })?;
        let sealed = self.sealer.seal(name, &plain)?;
        match &self.backend {
            Backend::Dir(dir) => write_private(dir, &record_path(dir, name), &sealed),
            Backend::Redis(redis) => {
                let mut connection = redis.connection().await?;
                redis::cmd("SET")
                    .arg(format!("{PREFIX}{name}"))
                    .arg(sealed)
                    .query_async::<()>(&mut connection)
                    .await
                    .map_err(redis_error)
            }
        }
    }

    /// Excludes the other replicas from refreshing `name`'s logins (Redis: a lease of
    /// [`LOCK_LEASE`], released when the lock drops); on one machine, the OAuth client already
    /// serialises its refreshes.
    async fn lock(&self, name: &str) -> Result<StoreLock, AuthError> {
        match &self.backend {
            Backend::Redis(redis) => {
                let key = format!("{PREFIX}lock:{name}");
                Ok(StoreLock::holding(redis.lease(key, LOCK_LEASE).await?))
            }
            Backend::Dir(_) => Ok(StoreLock::none()),
        }
    }

    /// Replaces `name`'s record with what `change` makes of it, with no other write to it in
    /// between: in this process (one writer at a time) and, with Redis, in any replica (a
    /// short lease of its own, apart from the refresh lock a refresh holds while it saves).
    async fn update(
        &self,
        name: &str,
        change: impl FnOnce(&mut Vec<StoredAuth>),
    ) -> Result<(), AuthError> {
        let _here = self.writing.lock().await;
        let _everywhere = match &self.backend {
            Backend::Redis(redis) => Some(
                redis
                    .lease(format!("{PREFIX}write:{name}"), WRITE_LEASE)
                    .await?,
            ),
            Backend::Dir(_) => None,
        };
        let mut entries = self.read(name).await?;
        change(&mut entries);
        self.write(name, &entries).await
    }

    /// Hands a sign-in's callback (its query) to the replica that waits for it: `true` once
    /// that replica says it took it (within [`HANDOVER_WAIT`]).
    pub(crate) async fn hand_over_callback(&self, query: &str) -> Result<bool, AuthError> {
        let Backend::Redis(redis) = &self.backend else {
            return Ok(false);
        };
        let sealed = self.sealer.seal(CALLBACKS, query.as_bytes())?;
        let mut connection = redis.connection().await?;
        let receivers: usize = redis::cmd("PUBLISH")
            .arg(CALLBACKS)
            .arg(sealed)
            .query_async(&mut connection)
            .await
            .map_err(redis_error)?;
        if receivers == 0 {
            return Ok(false);
        }
        let ack = ack_key(query);
        let deadline = tokio::time::Instant::now() + HANDOVER_WAIT;
        while tokio::time::Instant::now() < deadline {
            let taken: Option<String> = redis::cmd("GET")
                .arg(&ack)
                .query_async(&mut connection)
                .await
                .map_err(redis_error)?;
            if taken.is_some() {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(false)
    }

    /// Listens for callbacks other replicas hand over, each (its query) to `deliver`, which
    /// says whether a login here waited for it (and the handing replica hears so); `subscribed`
    /// hears once the channel is listened to. Returns when the connection fails.
    pub(crate) async fn listen_callbacks(
        &self,
        deliver: impl Fn(&str) -> bool,
        subscribed: tokio::sync::oneshot::Sender<()>,
    ) -> Result<(), AuthError> {
        use futures_util::StreamExt as _;
        let Backend::Redis(redis) = &self.backend else {
            return Ok(());
        };
        let mut pubsub = redis.client.get_async_pubsub().await.map_err(redis_error)?;
        pubsub.subscribe(CALLBACKS).await.map_err(redis_error)?;
        let _ = subscribed.send(());
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let text = String::from_utf8_lossy(message.get_payload_bytes()).into_owned();
            let query = match self.sealer.open(CALLBACKS, &text) {
                Ok(query) => String::from_utf8_lossy(&query).into_owned(),
                Err(e) => {
                    tracing::warn!(error = %e, "a sign-in callback from the vault's channel did not open");
                    continue;
                }
            };
            if deliver(&query) {
                let mut connection = redis.connection().await?;
                redis::cmd("SET")
                    .arg(ack_key(&query))
                    .arg("1")
                    .arg("EX")
                    .arg(60)
                    .query_async::<()>(&mut connection)
                    .await
                    .map_err(redis_error)?;
            }
        }
        Err(AuthError::store("the vault's Redis channel closed", None))
    }
}

/// How long a replica that got a callback waits for the replica it belongs to.
const HANDOVER_WAIT: Duration = Duration::from_secs(2);

/// Where the replica that took a handed-over callback says so (a hash: the query holds the
/// authorization code).
fn ack_key(query: &str) -> String {
    format!("{PREFIX}ack:{}", hashed(query))
}

/// What stands for `text` in a name (a record's, a key's): the first 16 bytes of its SHA-256,
/// in hex.
fn hashed(text: &str) -> String {
    let digest = toolwire::auth::verify::sha256(text.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// A held Redis lock: released (only if still this holder's) when dropped.
struct Lease {
    connection: redis::aio::ConnectionManager,
    key: String,
    token: String,
}

/// Deletes the lock only while it holds this holder's token.
const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

impl Drop for Lease {
    fn drop(&mut self) {
        let (mut connection, key, token) = (
            self.connection.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.token),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let released = redis::cmd("EVAL")
                    .arg(RELEASE)
                    .arg(1)
                    .arg(&key)
                    .arg(&token)
                    .query_async::<i64>(&mut connection)
                    .await;
                if let Err(e) = released {
                    tracing::debug!(error = ?e.kind(), "a vault lock lapses on its own");
                }
            });
        }
    }
}

fn record_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.vault"))
}

/// Writes `text` to `path` whole: a private temporary file in `dir` (the directory made
/// `0700` if missing), synced, renamed over it.
fn write_private(dir: &Path, path: &Path, text: &str) -> Result<(), AuthError> {
    use std::io::Write as _;
    let failed = |e: std::io::Error| {
        AuthError::store("a vault record could not be written", Some(Box::new(e)))
    };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(failed)?;
    // `tempfile` creates it 0600.
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.as_file().sync_all().map_err(failed)?;
    file.persist(path).map_err(|e| failed(e.error))?;
    Ok(())
}

/// One caller's logins, as a credential store of Toolwire's OAuth client.
struct CallerStore {
    vault: Arc<Vault>,
    name: String,
}

impl std::fmt::Debug for CallerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerStore")
            .field("vault", &self.vault)
            .finish_non_exhaustive()
    }
}

type Future<'a, T> = toolwire::BoxFuture<'a, Result<T, AuthError>>;

fn same(entry: &StoredAuth, key: &StoreKey) -> bool {
    entry.server == key.server && entry.issuer == key.issuer
}

impl CredentialStore for CallerStore {
    fn load<'a>(&'a self, key: &'a StoreKey) -> Future<'a, Option<StoredAuth>> {
        Box::pin(async move {
            let entries = self.vault.read(&self.name).await?;
            Ok(entries.into_iter().find(|e| same(e, key)))
        })
    }

    fn save<'a>(&'a self, entry: &'a StoredAuth) -> Future<'a, ()> {
        Box::pin(async move {
            let key = entry.key();
            self.vault
                .update(&self.name, |entries| {
                    match entries.iter_mut().find(|e| same(e, &key)) {
                        Some(e) => *e = entry.clone(),
                        None => entries.push(entry.clone()),
                    }
                })
                .await
        })
    }

    fn remove<'a>(&'a self, key: &'a StoreKey) -> Future<'a, ()> {
        Box::pin(async move {
            self.vault
                .update(&self.name, |entries| entries.retain(|e| !same(e, key)))
                .await
        })
    }

    fn list(&self) -> Future<'_, Vec<StoredAuth>> {
        Box::pin(async move { self.vault.read(&self.name).await })
    }

    fn lock(&self) -> Future<'_, StoreLock> {
        Box::pin(async move { self.vault.lock(&self.name).await })
    }
}

#[cfg(test)]
mod tests;
