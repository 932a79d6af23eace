//! Building a rustls server config from [`TlsSettings`]: certificates, key, client certificate
//! policy and protocol versions.
//!
//! `client_auth_type` maps onto rustls as follows (Go's meanings: `crypto/tls.ClientAuthType`):
//! - `NoClientCert` → no client auth;
//! - `RequestClientCert` / `RequireAnyClientCert` → [`AnyClientCert`], which asks for a
//!   certificate (optional / mandatory), checks the handshake signature (the client holds the key)
//!   but, like Go, does not verify the chain;
//! - `VerifyClientCertIfGiven` → `WebPkiClientVerifier` with `allow_unauthenticated()`;
//! - `RequireAndVerifyClientCert` → `WebPkiClientVerifier` (mutual TLS).

use crate::config::{ClientAuthType, PemSource, TlsSettings, TlsVersion};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use std::path::PathBuf;
use std::sync::Arc;

/// Why the TLS part of a web config could not be put in place. Names the field and the file;
/// the library's own error, where there is one, is the [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls_server_config.{field}: cannot read {path}")]
    Read {
        field: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The PEM text parsed but holds nothing usable (no certificate block).
    #[error("tls_server_config.{field}: {origin}: {message}")]
    Pem {
        field: &'static str,
        origin: String,
        message: &'static str,
    },
    /// The PEM text does not parse.
    #[error("tls_server_config.{field}: {origin}: {message}")]
    PemParse {
        field: &'static str,
        origin: String,
        message: &'static str,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// rustls refused a certificate, key or CA.
    #[error("tls_server_config.{field}: {origin}: {message}")]
    Rejected {
        field: &'static str,
        origin: String,
        message: &'static str,
        #[source]
        source: rustls::Error,
    },
    /// `client_auth_type` needs a client CA and none is configured.
    #[error("tls_server_config: client_ca_file is required by this client_auth_type")]
    MissingClientCa,
    /// rustls refused the client certificate verifier.
    #[error("tls_server_config: client certificate verifier")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    /// rustls refused the protocol versions.
    #[error("tls_server_config: protocol versions")]
    Versions(#[source] rustls::Error),
}

/// The `ring` provider narrowed to the configured TLS 1.2 suites and key exchange groups, in
/// the configured order. Names were checked when the config was validated.
fn provider(t: &TlsSettings) -> Arc<CryptoProvider> {
    use rustls::crypto::ring::{cipher_suite as cs, kx_group};
    let mut p = rustls::crypto::ring::default_provider();
    if !t.cipher_suites.is_empty() {
        let mut suites: Vec<rustls::SupportedCipherSuite> = p
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .copied()
            .collect();
        for name in &t.cipher_suites {
            let s = match name.as_str() {
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => {
                    cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                }
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => {
                    cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
                }
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => {
                    cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
                }
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => {
                    cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
                }
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => {
                    cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
                }
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => {
                    cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
                }
                _ => continue,
            };
            if !suites.iter().any(|x| x.suite() == s.suite()) {
                suites.push(s);
            }
        }
        p.cipher_suites = suites;
    }
    if !t.curve_preferences.is_empty() {
        let mut groups: Vec<&'static dyn rustls::crypto::SupportedKxGroup> = Vec::new();
        for name in &t.curve_preferences {
            let g = match name.as_str() {
                "X25519" => kx_group::X25519,
                "CurveP256" => kx_group::SECP256R1,
                "CurveP384" => kx_group::SECP384R1,
                _ => continue,
            };
            if !groups.iter().any(|x| x.name() == g.name()) {
                groups.push(g);
            }
        }
        p.kx_groups = groups;
    }
    Arc::new(p)
}

/// Reads PEM text from a file or the inline value.
fn read_pem(src: &PemSource, field: &'static str) -> Result<(Vec<u8>, String), TlsError> {
    match src {
        PemSource::File(path) => std::fs::read(path)
            .map(|b| (b, path.display().to_string()))
            .map_err(|source| TlsError::Read {
                field,
                path: path.clone(),
                source,
            }),
        PemSource::Inline(text) => Ok((text.clone().into_bytes(), "inline value".to_string())),
    }
}

fn read_certs(
    src: &PemSource,
    field: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let (bytes, origin) = read_pem(src, field)?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&bytes).collect();
    let certs = certs.map_err(|source| TlsError::PemParse {
        field,
        origin: origin.clone(),
        message: "not PEM certificates",
        source,
    })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            field,
            origin,
            message: "holds no PEM CERTIFICATE block",
        });
    }
    Ok(certs)
}

fn read_key(src: &PemSource) -> Result<PrivateKeyDer<'static>, TlsError> {
    let field = if src.file().is_some() {
        "key_file"
    } else {
        "key"
    };
    let (bytes, origin) = read_pem(src, field)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|source| TlsError::PemParse {
        field,
        origin,
        message: "no usable PEM private key (PKCS#8, PKCS#1 or SEC1)",
        source,
    })
}

/// Builds the rustls server config. Reads every file once; the result is immutable and is
/// replaced whole when files change.
pub fn build_server_config(t: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider(t);
    let cert_field = if t.cert.file().is_some() {
        "cert_file"
    } else {
        "cert"
    };
    let certs = read_certs(&t.cert, cert_field)?;
    let key = read_key(&t.key)?;

    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if t.min_version <= TlsVersion::TLS12 && t.max_version >= TlsVersion::TLS12 {
        versions.push(&rustls::version::TLS12);
    }
    if t.max_version >= TlsVersion::TLS13 {
        versions.push(&rustls::version::TLS13);
    }

    let verifier: Option<Arc<dyn ClientCertVerifier>> = match t.client_auth_type {
        ClientAuthType::NoClientCert => None,
        ClientAuthType::RequestClientCert | ClientAuthType::RequireAnyClientCert => {
            // The CA, if given, is still read so that a broken file is reported.
            if let Some(ca) = &t.client_ca {
                client_roots(ca)?;
            }
            Some(Arc::new(AnyClientCert {
                mandatory: t.client_auth_type == ClientAuthType::RequireAnyClientCert,
                algorithms: provider.signature_verification_algorithms,
            }))
        }
        ClientAuthType::VerifyClientCertIfGiven | ClientAuthType::RequireAndVerifyClientCert => {
            let Some(ca) = &t.client_ca else {
                return Err(TlsError::MissingClientCa);
            };
            let roots = Arc::new(client_roots(ca)?);
            let mut b = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            if t.client_auth_type == ClientAuthType::VerifyClientCertIfGiven {
                b = b.allow_unauthenticated();
            }
            Some(b.build().map_err(TlsError::Verifier)?)
        }
    };

    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(TlsError::Versions)?;
    let builder = match verifier {
        None => builder.with_no_client_auth(),
        Some(v) => builder.with_client_cert_verifier(v),
    };
    // `with_single_cert` also checks that the key belongs to the certificate.
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|source| TlsError::Rejected {
            field: "key_file",
            origin: "certificate and key".into(),
            message: "do not form a usable pair",
            source,
        })?;
    cfg.ignore_client_order = t.prefer_server_cipher_suites;
    // HTTP/1.1 only (no h2 stack linked): advertise exactly what is served.
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

fn client_roots(ca: &PemSource) -> Result<RootCertStore, TlsError> {
    let field = if ca.file().is_some() {
        "client_ca_file"
    } else {
        "client_ca"
    };
    let mut roots = RootCertStore::empty();
    for c in read_certs(ca, field)? {
        roots.add(c).map_err(|source| TlsError::Rejected {
            field,
            origin: ca
                .file()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "inline value".into()),
            message: "not a usable CA certificate",
            source,
        })?;
    }
    Ok(roots)
}

/// Go's `RequestClientCert` / `RequireAnyClientCert`: a certificate is asked for and its
/// handshake signature checked, its chain is not. Documented as insecure for access control in
/// the toolkit too; offered for compatibility.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
