//! HTTPS on the other side of the network: a certificate authority made for each run (rcgen;
//! its key never leaves the harness's memory) that only the sandbox trusts, through the
//! sandbox's view of the system bundle and the usual variables (written by the run), and the
//! TLS side of the observer's listeners (rustls): a connection that opens with a ClientHello
//! gets a certificate for the name it asked for (SNI), or for the address it reached, signed
//! by that authority; the request inside is then observed and answered as plain HTTP is.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig, ServerConnection};
use rustls::sign::CertifiedKey;

use crate::sandbox::policy::SYSTEM_BUNDLES;

/// Errors making the authority or a certificate.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen refused the parameters or could not sign.
    #[error("cannot make a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the key or the configuration.
    #[error("cannot set up TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The environment variables that point TLS clients at a CA bundle, by runtime: OpenSSL (and
/// Python's ssl, httpx, curl, Go, rustls-native-certs), requests, curl, git, pip and Deno take
/// the whole bundle; Node adds the run's certificate to its own list.
pub const BUNDLE_VARIABLES: [&str; 7] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "DENO_CERT",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
];

/// Node's variable: extra certificates beside its built-in list.
pub const NODE_VARIABLE: &str = "NODE_EXTRA_CA_CERTS";

/// A certificate authority for one run, and the certificates it made.
pub struct Authority {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    leaves: Mutex<HashMap<String, Arc<CertifiedKey>>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A fresh authority (an ECDSA P-256 key) that looks like an ordinary corporate root: a
    /// company's name (one of many, chosen per run), valid for ten years from some months ago.
    pub fn new() -> Result<Arc<Authority>, TlsError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let company = corporate_name();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{company} Root CA"));
        params
            .distinguished_name
            .push(DnType::OrganizationName, format!("{company} Inc."));
        params
            .distinguished_name
            .push(DnType::OrganizationalUnitName, "IT Security");
        params.distinguished_name.push(DnType::CountryName, "US");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params, 200, 3452);
        let key = KeyPair::generate()?;
        let ca_pem = params.self_signed(&key)?.pem();
        Ok(Arc::new(Authority {
            ca_pem,
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
        }))
    }

    /// The authority's certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The system bundle (the first of [`SYSTEM_BUNDLES`] that is readable) with the run's
    /// certificate appended.
    pub fn bundle_pem(&self) -> String {
        let mut bundle = SYSTEM_BUNDLES
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        if !bundle.is_empty() && !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(&self.ca_pem);
        bundle
    }

    /// A certificate (with its key) for `name`, a DNS name or an address, made on first use.
    fn leaf(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = leaves.get(name) {
            return Some(k.clone());
        }
        let made = (|| -> Result<Arc<CertifiedKey>, TlsError> {
            let mut params = CertificateParams::new(vec![name.to_string()])?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
            // As a public site's certificate: issued some weeks ago for 90 days.
            set_validity(&mut params, 23, 67);
            let key = KeyPair::generate()?;
            let cert = params.signed_by(&key, &self.issuer)?;
            let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
            let signing = rustls::crypto::ring::sign::any_supported_type(&der)?;
            Ok(Arc::new(CertifiedKey::new(
                vec![CertificateDer::from(cert.der().to_vec())],
                signing,
            )))
        })()
        .ok()?;
        leaves.insert(name.to_string(), made.clone());
        Some(made)
    }

    /// The server side of a connection to `reached`: certificates for the name asked, else
    /// for the address.
    pub fn server_config(self: &Arc<Self>, reached: Option<IpAddr>) -> Option<Arc<ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Resolver {
                authority: self.clone(),
                reached,
            }));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Some(Arc::new(config))
    }
}

/// Valid from `days_ago` days before now until `days_ahead` days after, at a whole hour.
fn set_validity(params: &mut CertificateParams, days_ago: i64, days_ahead: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let hour = now - now % 3600;
    let at = |secs: i64| {
        rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(secs.max(0) as u64)
    };
    params.not_before = at(hour - days_ago * 86_400);
    params.not_after = at(hour + days_ahead * 86_400);
}

/// A company name for the run's authority, one of many (a fixed name would be a fingerprint).
fn corporate_name() -> String {
    const FIRST: [&str; 12] = [
        "Westbrook",
        "Bluepeak",
        "Harborview",
        "Cobalt",
        "Meridian",
        "Silverline",
        "Redwood",
        "Lakeshore",
        "Summit",
        "Ironbridge",
        "Brightwater",
        "Granite",
    ];
    const SECOND: [&str; 8] = [
        "Systems",
        "Networks",
        "Analytics",
        "Logistics",
        "Labs",
        "Health",
        "Financial",
        "Digital",
    ];
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as usize ^ std::process::id() as usize)
        .unwrap_or(0);
    format!(
        "{} {}",
        FIRST[n % FIRST.len()],
        SECOND[(n / 7) % SECOND.len()]
    )
}

/// Picks the certificate for one connection.
#[derive(Debug)]
struct Resolver {
    authority: Arc<Authority>,
    reached: Option<IpAddr>,
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match hello.server_name() {
            Some(name) => self.authority.leaf(name),
            None => self.authority.leaf(&self.reached?.to_string()),
        }
    }
}

/// A connection whose first bytes were already read.
struct Prefixed<'a, S> {
    first: std::io::Cursor<&'a [u8]>,
    inner: &'a mut S,
}

impl<S: Read> Read for Prefixed<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.first.read(buf)?;
        if n > 0 {
            return Ok(n);
        }
        self.inner.read(buf)
    }
}

impl<S: Write> Write for Prefixed<'_, S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Completes the TLS handshake of a connection whose first bytes `first` (a ClientHello) were
/// already read, reads the request inside ([`super::web::read_request`]: its head and body,
/// within the connection's read timeout), answers it with `answer`, and returns the request;
/// `None` when the client gave up (it did not trust the certificate, or sent nothing).
pub fn serve<S: Read + Write>(
    config: Arc<ServerConfig>,
    first: &[u8],
    conn: &mut S,
    answer: impl FnOnce(&super::web::Request) -> Option<Vec<u8>>,
) -> Option<(super::web::Request, Vec<u8>)> {
    let mut tls = ServerConnection::new(config).ok()?;
    let mut io = Prefixed {
        first: std::io::Cursor::new(first),
        inner: conn,
    };
    let mut stream = rustls::Stream::new(&mut tls, &mut io);
    let request = super::web::read_request(Vec::new(), &mut stream);
    if request.head.is_empty() {
        return None;
    }
    if let Some(reply) = answer(&request) {
        let _ = stream.write_all(&reply);
    }
    // The answer is whole (a client that reads until the end has it at once); what the
    // client sends after, until it closes or pauses, is still read.
    tls.send_close_notify();
    let _ = tls.complete_io(&mut io);
    let mut stream = rustls::Stream::new(&mut tls, &mut io);
    let after = super::web::read_on(&mut stream, super::web::MAX_AFTER_ANSWER);
    Some((request, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_trusts_the_run_authority_gets_its_page_over_tls() {
        let authority = Authority::new().expect("authority");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server_side = authority.clone();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .expect("timeout");
            let mut first = vec![0u8; 4096];
            let n = conn.read(&mut first).expect("read");
            let config = server_side.server_config(Some(addr.ip())).expect("config");
            serve(config, &first[..n], &mut conn, |r| {
                crate::observe::web::answer(&r.head)
            })
        });
        // A client that trusts only the run's authority, asking for a .test name.
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(authority.ca_pem().as_bytes())
        {
            roots.add(cert.expect("pem")).expect("root");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("docs.example.test").expect("name");
        let mut client = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
        let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
        let mut stream = rustls::Stream::new(&mut client, &mut tcp);
        stream
            .write_all(
                b"GET /guide HTTP/1.1\r\nHost: docs.example.test\r\nAccept: text/html\r\n\r\n",
            )
            .expect("request");
        let mut page = Vec::new();
        let _ = stream.read_to_end(&mut page);
        let page = String::from_utf8_lossy(&page);
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        assert!(page.contains("<title>"), "{page}");
        // An honest client closes once it has read its answer.
        drop(tcp);
        let (request, after) = server.join().expect("server").expect("request seen");
        assert!(request.head.starts_with(b"GET /guide HTTP/1.1\r\n"));
        assert!(after.is_empty(), "{after:?}");
        assert!(authority.bundle_pem().ends_with(authority.ca_pem()));
    }
}
