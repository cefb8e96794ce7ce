//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`): `skills/list` and
//! `skills/get`. A skill is a `SKILL.md` resource with YAML frontmatter and a manifest of the
//! files that come with it, each with its SHA-256 digest and size; the files themselves are
//! read with `resources/read`, only when the skill is used.

use serde::{Deserialize, Serialize};

use crate::Meta;
use crate::common::{CacheScope, Cacheable, JsonObject, ResultType};

/// The extension's identifier, as servers declare it under `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// One file of a skill's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillFile {
    /// Its resource URI (`skill://name/…`).
    pub uri: String,
    /// `sha256:` and the lowercase hex SHA-256 of its bytes.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A skill as listed: its `SKILL.md` URI, its frontmatter verbatim, and its manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// The URI of its `SKILL.md`.
    pub uri: String,
    /// The YAML frontmatter of its `SKILL.md`, as JSON (`name`, `description`, …).
    #[serde(default)]
    pub frontmatter: JsonObject,
    /// Every file of the skill, `SKILL.md` included, with digest and size.
    #[serde(default)]
    pub resources: Vec<SkillFile>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Skill {
    /// Its manifest entry for `uri`, if the manifest lists it.
    pub fn file(&self, uri: &str) -> Option<&SkillFile> {
        self.resources.iter().find(|f| f.uri == uri)
    }
}

/// `skills/list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsResult {
    /// `resultType` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The skills on this page.
    pub skills: Vec<Skill>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Freshness in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Who may share this page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Cacheable for ListSkillsResult {
    fn raw_ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    fn raw_cache_scope(&self) -> Option<CacheScope> {
        self.cache_scope
    }
}

/// `skills/get` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillParams {
    /// The URI of the skill's `SKILL.md`.
    pub uri: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `skills/get` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillResult {
    /// `resultType` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The skill.
    pub skill: Skill,
    /// Freshness in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Who may share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Cacheable for GetSkillResult {
    fn raw_ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    fn raw_cache_scope(&self) -> Option<CacheScope> {
        self.cache_scope
    }
}

/// The MIME type of a directory among `resources/directory/read`'s children.
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";

/// `resources/directory/read` params (the skills extension, where the server declares
/// `directoryRead`): a directory's URI and the cursor of the next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDirectoryParams {
    /// The directory.
    pub uri: String,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `resources/directory/read` result: one page of a directory's direct children (a
/// subdirectory has the MIME type [`DIRECTORY_MIME_TYPE`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDirectoryResult {
    /// `resultType` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The children on this page.
    pub resources: Vec<crate::Resource>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Freshness in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<i64>,
    /// Who may share this page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields this crate does not know, kept for round trips.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Cacheable for ReadDirectoryResult {
    fn raw_ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    fn raw_cache_scope(&self) -> Option<CacheScope> {
        self.cache_scope
    }
}
