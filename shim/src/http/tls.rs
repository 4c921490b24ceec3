//! The server's certificate: PEM files read at start and again, on the next connection, after
//! either changes (a renewal needs no restart). A renewal that cannot be read keeps the
//! certificate in use and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

type Stamp = Option<(SystemTime, SystemTime)>;

pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    current: Mutex<(Stamp, TlsAcceptor)>,
}

impl Tls {
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, String> {
        let stamp = stamp(cert, key);
        let acceptor = acceptor(cert, key)?;
        Ok(Tls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: Mutex::new((stamp, acceptor)),
        })
    }

    /// The acceptor of the files as they are now.
    pub fn acceptor(&self) -> TlsAcceptor {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp(&self.cert, &self.key);
        if now != current.0 {
            current.0 = now;
            match acceptor(&self.cert, &self.key) {
                Ok(a) => {
                    tracing::info!("TLS certificate read again: {}", self.cert.display());
                    current.1 = a;
                }
                Err(e) => tracing::warn!("{e}; still serving the previous certificate"),
            }
        }
        current.1.clone()
    }
}

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((m(cert)?, m(key)?))
}

fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| format!("tls_cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("tls_cert {}: no certificate in it", cert.display()));
    }
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("tls_key {}: {e}", key.display()))?;
    // ring, not aws-lc-rs: it builds without cmake or a C toolchain beyond cc. Its lack of
    // post-quantum key exchange is rustls's reason for the deprecation.
    #[allow(deprecated)]
    let provider = ring::default_provider();
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls_cert and tls_key do not make a certificate: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
