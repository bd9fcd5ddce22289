//! TLS client settings shared by the outputs that speak TLS (`http_output`, `otlp_output`,
//! `kafka_output`): trusted CAs from files or a directory (the system's web PKI roots when none
//! is named), `insecure` (no certificate check, signatures still verified), and a client
//! certificate for mutual TLS. rustls with the ring provider: no C library, static builds and
//! aarch64 cross builds need nothing more.

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why a TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("cannot read {what} `{path}`: {message}")]
    Pem {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("invalid TLS settings: {0}")]
    Tls(String),
}

/// A file and the configuration key that named it (for error messages).
pub type Named = (PathBuf, &'static str);

/// A client certificate and its key (PEM).
#[derive(Clone, Debug)]
pub struct ClientCert {
    pub cert: Named,
    pub key: Named,
}

/// What a TLS client trusts and presents. Empty paths are skipped.
#[derive(Clone, Debug, Default)]
pub struct ClientTls {
    /// Accept any server certificate.
    pub insecure: bool,
    /// PEM files of trusted CA certificates (an unreadable one is an error).
    pub ca_files: Vec<Named>,
    /// A directory of PEM certificates (unreadable entries are skipped, as OpenSSL's CApath).
    pub ca_dir: Option<Named>,
    pub client: Option<ClientCert>,
}

fn pem_error(what: &'static str, path: &Path, message: impl ToString) -> TlsSetupError {
    TlsSetupError::Pem {
        what,
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn read_certs(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let file = fs::File::open(path).map_err(|e| pem_error(what, path, e))?;
    let certs = rustls_pemfile::certs(&mut BufReader::new(file))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(what, path, e))?;
    Ok(certs)
}

impl ClientTls {
    /// The rustls client configuration.
    pub fn client_config(&self) -> Result<ClientConfig, TlsSetupError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError::Tls(e.to_string()))?;
        let builder = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
        } else {
            let mut roots = RootCertStore::empty();
            let mut explicit = false;
            for (path, what) in &self.ca_files {
                if path.as_os_str().is_empty() {
                    continue;
                }
                explicit = true;
                let certs = read_certs(path, what)?;
                if certs.is_empty() {
                    return Err(pem_error(what, path, "no PEM certificate in it"));
                }
                for cert in certs {
                    roots.add(cert).map_err(|e| pem_error(what, path, e))?;
                }
            }
            if let Some((dir, what)) = self
                .ca_dir
                .as_ref()
                .filter(|(d, _)| !d.as_os_str().is_empty())
            {
                // Every readable PEM certificate in the directory.
                if let Ok(entries) = fs::read_dir(dir) {
                    for entry in entries.flatten() {
                        let path = entry.path();
                        if path.is_file() {
                            if let Ok(certs) = read_certs(&path, what) {
                                for cert in certs {
                                    let _ = roots.add(cert);
                                }
                            }
                        }
                    }
                }
            }
            if roots.is_empty() && !explicit {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            builder.with_root_certificates(roots)
        };
        match &self.client {
            Some(ClientCert {
                cert: (cert_path, cert_what),
                key: (key_path, key_what),
            }) => {
                let certs = read_certs(cert_path, cert_what)?;
                let file =
                    fs::File::open(key_path).map_err(|e| pem_error(key_what, key_path, e))?;
                let key: PrivateKeyDer<'static> =
                    rustls_pemfile::private_key(&mut BufReader::new(file))
                        .map_err(|e| pem_error(key_what, key_path, e))?
                        .ok_or_else(|| pem_error(key_what, key_path, "no private key found"))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| TlsSetupError::Tls(e.to_string()))
            }
            None => Ok(builder.with_no_client_auth()),
        }
    }
}

/// Whether an I/O error came from TLS (a certificate the client does not trust, a handshake
/// the server refused): somewhere in its source chain a [`rustls::Error`].
pub fn is_tls_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
            {
                return true;
            }
        }
        source = e.source();
    }
    false
}

/// `insecure: true`: accepts any server certificate (signatures are still checked).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
