//! `${VAR}` in a file's values, filled in from the environment.

use super::ProblemKind;

/// `${VAR}`, `${VAR:-default}` (the default when `VAR` is unset or empty) and `${env:VAR}`.
pub(crate) fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ProblemKind> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ProblemKind::MalformedVariable)?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let name = match name.split_once(':') {
            Some(("env", var)) => var,
            Some((scheme, _)) => return Err(ProblemKind::UnsupportedScheme(scheme.to_owned())),
            None => name,
        };
        if name.is_empty() {
            return Err(ProblemKind::MalformedVariable);
        }
        match (env(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) if env(name).is_some() => {}
            (None, None) => return Err(ProblemKind::UnsetVariable(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
