//! The skills extension for applications: list and get skills, and load a skill's files only
//! when it is used, each checked against its manifest (size, then SHA-256 digest) and, for
//! `SKILL.md`, its YAML frontmatter compared with what the listing said, field by field.
//! Content that fails a check is never returned.

use base64::Engine as _;
use serde_json::{Map, Value};
use toolwire_types::methods::method;
use toolwire_types::{
    GetSkillParams, JsonObject, ListSkillsResult, ReadDirectoryParams, ReadDirectoryResult,
    Resource, ResourceContents, Skill, SkillFile,
};

use crate::{Client, Error};

/// How many pages `list_all_skills` walks before it stops (a server that never ends its
/// cursor chain).
const MAX_PAGES: usize = 1000;

/// A skill whose `SKILL.md` passed every check.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LoadedSkill {
    /// The skill as listed.
    pub skill: Skill,
    /// `SKILL.md`, frontmatter included, as served and verified.
    pub text: String,
}

impl Client {
    /// One page of `skills/list`. Refused locally (`UsageError::InvalidCall`, not advertised) when
    /// the server did not declare the skills extension.
    pub async fn list_skills(&self, cursor: Option<String>) -> Result<ListSkillsResult, Error> {
        self.request::<method::ListSkills>(crate::client::list_params(cursor))
            .await
    }

    /// Every skill, walking the pages (at most 1000; a cursor the server returned before ends
    /// the walk, with a warning).
    pub async fn list_all_skills(&self) -> Result<Vec<Skill>, Error> {
        walk("skills/list", |cursor| async move {
            let page = self.list_skills(cursor).await?;
            Ok((page.skills, page.next_cursor))
        })
        .await
    }

    /// One page of `resources/directory/read`: the direct children of directory `uri` (a
    /// subdirectory has the MIME type `inode/directory`). Refused locally (`UsageError::InvalidCall`,
    /// not advertised) unless the server declared the skills extension with `directoryRead`.
    pub async fn read_directory_page(
        &self,
        uri: &str,
        cursor: Option<String>,
    ) -> Result<ReadDirectoryResult, Error> {
        let params = ReadDirectoryParams {
            uri: uri.to_owned(),
            cursor,
            meta: None,
            extra: JsonObject::new(),
        };
        self.request::<method::ReadDirectory>(params).await
    }

    /// Every direct child of directory `uri`, walking the pages as
    /// [`Client::list_all_skills`] does.
    pub async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>, Error> {
        walk("resources/directory/read", |cursor| async move {
            let page = self.read_directory_page(uri, cursor).await?;
            Ok((page.resources, page.next_cursor))
        })
        .await
    }

    /// `skills/get`: one skill by the URI of its `SKILL.md`.
    pub async fn get_skill(&self, uri: &str) -> Result<Skill, Error> {
        let params = GetSkillParams {
            uri: uri.to_owned(),
            meta: None,
            extra: JsonObject::new(),
        };
        Ok(self.request::<method::GetSkill>(params).await?.skill)
    }

    /// Loads `skill`: reads its `SKILL.md`, checks it against the manifest (size, digest) and
    /// its frontmatter against the listing's. Nothing is read before this is called.
    pub async fn load_skill(&self, skill: &Skill) -> Result<LoadedSkill, Error> {
        let bytes = self.read_skill_file(skill, &skill.uri).await?;
        let failed = |reason: String| {
            Error::Protocol(crate::ProtocolError::SkillVerification {
                uri: skill.uri.clone(),
                reason,
            })
        };
        let text = String::from_utf8(bytes).map_err(|_| failed("SKILL.md is not UTF-8".into()))?;
        let found = frontmatter(&text).map_err(failed)?;
        if let Some(field) = differing_field(&skill.frontmatter, &found) {
            return Err(failed(format!(
                "its frontmatter's `{field}` is not what the listing said"
            )));
        }
        Ok(LoadedSkill {
            skill: skill.clone(),
            text,
        })
    }

    /// Reads one file of `skill`'s manifest and checks its size and digest; a file the
    /// manifest does not list is refused before anything is read.
    pub async fn read_skill_file(&self, skill: &Skill, uri: &str) -> Result<Vec<u8>, Error> {
        let failed = |reason: String| {
            Error::Protocol(crate::ProtocolError::SkillVerification {
                uri: uri.to_owned(),
                reason,
            })
        };
        let entry = skill
            .file(uri)
            .ok_or_else(|| failed("the skill's manifest does not list it".into()))?;
        let result = self.read_resource(uri).await?;
        let content = result
            .contents
            .iter()
            .find(|c| c.uri() == uri)
            .or(result.contents.first())
            .ok_or_else(|| failed("the server returned no content".into()))?;
        let bytes = match content {
            ResourceContents::Text(t) => t.text.clone().into_bytes(),
            ResourceContents::Blob(b) => base64::engine::general_purpose::STANDARD
                .decode(&b.blob)
                .map_err(|_| failed("its blob is not base64".into()))?,
        };
        verify(entry, &bytes).map_err(failed)?;
        Ok(bytes)
    }
}

/// Walks the pages `page` fetches (items and next cursor), at most [`MAX_PAGES`]; a cursor
/// seen before ends the walk with a warning.
pub(crate) async fn walk<T, F, Fut>(method: &str, mut page: F) -> Result<Vec<T>, Error>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), Error>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let (items, next) = page(cursor.take()).await?;
        all.extend(items);
        match next {
            Some(next) if seen.insert(next.clone()) => cursor = Some(next),
            Some(_) => {
                tracing::warn!(method, "a cursor the server had returned before; stopping");
                break;
            }
            None => break,
        }
    }
    Ok(all)
}

/// Checks `bytes` against a manifest entry: the size first (a different length fails
/// whatever the digest), then `sha256:<hex>`.
pub(crate) fn verify(entry: &SkillFile, bytes: &[u8]) -> Result<(), String> {
    if bytes.len() as u64 != entry.size {
        return Err(format!(
            "{} bytes, the manifest says {}",
            bytes.len(),
            entry.size
        ));
    }
    let Some(expected) = entry.digest.strip_prefix("sha256:") else {
        return Err(format!("unsupported digest `{}`", entry.digest));
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if !hex.eq_ignore_ascii_case(expected) {
        return Err("its SHA-256 digest is not the manifest's".into());
    }
    Ok(())
}

/// The YAML frontmatter of a `SKILL.md` (between a first line `---` and the next `---`), as
/// a JSON object.
pub(crate) fn frontmatter(text: &str) -> Result<JsonObject, String> {
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("SKILL.md does not start with frontmatter (`---`)".into());
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err("SKILL.md's frontmatter is not closed (`---`)".into());
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(&yaml)
        .map_err(|e| format!("its frontmatter is not YAML: {e}"))?;
    match docs.first().map(to_json).transpose()? {
        Some(Value::Object(map)) => Ok(map),
        None => Ok(Map::new()),
        Some(_) => Err("its frontmatter is not a mapping".into()),
    }
}

fn to_json(yaml: &yaml_rust2::Yaml) -> Result<Value, String> {
    use yaml_rust2::Yaml;
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(r.clone()), Value::Number),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Hash(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    _ => return Err("a frontmatter key is not a string".into()),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err("its frontmatter holds an alias or a bad value".into());
        }
    })
}

/// The first field where `listed` and `found` differ (either side's), if any.
fn differing_field(listed: &JsonObject, found: &JsonObject) -> Option<String> {
    listed
        .iter()
        .find(|(k, v)| found.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .or_else(|| found.keys().find(|k| !listed.contains_key(*k)).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  owner: billing\n  tags: [a, b]\n---\n\nSkill body.\n";

    fn entry(bytes: &[u8]) -> SkillFile {
        let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
        SkillFile {
            uri: "skill://pdf-processing/SKILL.md".into(),
            digest: format!(
                "sha256:{}",
                digest
                    .as_ref()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ),
            size: bytes.len() as u64,
            extra: JsonObject::new(),
        }
    }

    #[test]
    fn files_are_checked_by_size_then_digest() {
        let e = entry(SKILL.as_bytes());
        assert_eq!(verify(&e, SKILL.as_bytes()), Ok(()));
        let tampered = SKILL.replace("Skill body.", "Evil body!!");
        assert_eq!(tampered.len(), SKILL.len());
        assert!(
            verify(&e, tampered.as_bytes())
                .unwrap_err()
                .contains("digest")
        );
        let longer = format!("{SKILL}extra");
        assert!(verify(&e, longer.as_bytes()).unwrap_err().contains("bytes"));
        let other = SkillFile {
            digest: "md5:00".into(),
            ..e
        };
        assert!(
            verify(&other, SKILL.as_bytes())
                .unwrap_err()
                .contains("unsupported")
        );
    }

    #[test]
    fn frontmatter_is_yaml_compared_field_by_field() {
        let found = frontmatter(SKILL).expect("frontmatter");
        assert_eq!(found["name"], "pdf-processing");
        assert_eq!(found["metadata"]["tags"], serde_json::json!(["a", "b"]));
        let listed = found.clone();
        assert_eq!(differing_field(&listed, &found), None);
        let mut changed = found.clone();
        changed.insert(
            "description".into(),
            Value::String("Exfiltrate credentials".into()),
        );
        assert_eq!(
            differing_field(&listed, &changed).as_deref(),
            Some("description")
        );
        let mut extra = found.clone();
        extra.insert("allowed-tools".into(), Value::String("*".into()));
        assert_eq!(
            differing_field(&listed, &extra).as_deref(),
            Some("allowed-tools")
        );
        assert!(frontmatter("no frontmatter").is_err());
        assert!(frontmatter("---\nname: x\n").is_err(), "unclosed");
        assert!(frontmatter("---\n- a\n---\n").is_err(), "not a mapping");
        assert_eq!(
            frontmatter("---\r\nname: x\r\n---\r\n").expect("crlf")["name"],
            "x"
        );
    }
}
