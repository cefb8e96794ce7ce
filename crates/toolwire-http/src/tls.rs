//! The rustls configuration a transport connects with.

use std::sync::{Arc, OnceLock};

use crate::HttpError;
use crate::builder::TlsRoots;

/// The configuration for `roots`, its ALPN protocols left to hyper-rustls (which offers `h2`
/// and `http/1.1` itself and refuses a configuration that already names protocols).
///
/// The built-in root choices are built once per process and cloned: a clone shares the
/// certificate verifier (and with it the root store) and the session-resumption cache. A
/// root store is not small (the platform's, parsed from its PEM files here, held ~85 KB),
/// and a host with fifty servers held fifty of them, each read from disk again.
pub(crate) fn client_config(roots: &TlsRoots) -> Result<rustls::ClientConfig, HttpError> {
    static WEBPKI: OnceLock<Result<rustls::ClientConfig, Failure>> = OnceLock::new();
    static NATIVE: OnceLock<Result<rustls::ClientConfig, Failure>> = OnceLock::new();
    let mut config = match roots {
        TlsRoots::Config(config) => (**config).clone(),
        TlsRoots::WebPki => WEBPKI.get_or_init(|| built(false)).clone()?,
        TlsRoots::Native => NATIVE.get_or_init(|| built(true)).clone()?,
    };
    config.alpn_protocols.clear();
    Ok(config)
}

/// Why a built-in configuration could not be built, kept to be reported to every transport
/// that asks for it.
#[derive(Clone)]
enum Failure {
    NoNativeRoots,
    Tls(rustls::Error),
}

impl From<Failure> for HttpError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::NoNativeRoots => HttpError::NoNativeRoots,
            Failure::Tls(e) => HttpError::Tls(e),
        }
    }
}

fn built(native: bool) -> Result<rustls::ClientConfig, Failure> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut store = rustls::RootCertStore::empty();
    if native {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::debug!(error = %e, "a native root certificate could not be loaded");
        }
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(Failure::NoNativeRoots);
        }
    } else {
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(Failure::Tls)?
        .with_root_certificates(store)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_roots_are_built_once_and_shared_by_every_transport() {
        let (Ok(a), Ok(b)) = (
            client_config(&TlsRoots::WebPki),
            client_config(&TlsRoots::WebPki),
        ) else {
            unreachable!("the compiled-in roots always build")
        };
        assert!(Arc::ptr_eq(
            &a.client_auth_cert_resolver,
            &b.client_auth_cert_resolver
        ));
        assert!(a.alpn_protocols.is_empty());
    }
}
