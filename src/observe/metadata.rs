//! The cloud metadata endpoint as a server in the sandbox meets it. Every address leads to the
//! observer's listeners, so a request to 169.254.169.254 (or to `metadata.google.internal`)
//! lands here and is answered as the instance metadata services of AWS (IMDSv1 and the token
//! of IMDSv2), Google Cloud and Azure answer it, with the run's planted instance credentials
//! (canaries, see [`crate::workspace::canary`]): a tool that fetches them is seen doing it,
//! and one that returns or sends them on is found by the same scans as any other secret.
//! Nothing here says it is not a real instance.

use std::net::IpAddr;

use super::web::request_head;
use crate::workspace::canary::Canaries;

/// Where the planted instance credentials are planted, as reports name it.
pub const PLACE: &str = "http://169.254.169.254/";

/// The endpoint's addresses (AWS's IPv6 one too).
const ADDRESSES: [&str; 2] = ["169.254.169.254", "fd00:ec2::254"];

/// The names Google Cloud gives it.
const NAMES: [&str; 2] = ["metadata.google.internal", "metadata"];

/// The role the instance has, as AWS lists it.
const ROLE: &str = "app-instance-role";

/// The planted instance credentials.
#[derive(Debug, Clone)]
pub struct CloudMetadata {
    aws_key_id: String,
    aws_secret: String,
    aws_token: String,
    gcp_token: String,
    azure_token: String,
}

impl CloudMetadata {
    /// The instance credentials among `canaries`, when they were planted.
    pub fn of(canaries: &Canaries) -> Option<CloudMetadata> {
        let value = |kind: &str| {
            canaries
                .items
                .iter()
                .find(|c| c.place == PLACE && c.kind == kind)
                .map(|c| c.value.clone())
        };
        Some(CloudMetadata {
            aws_key_id: value("aws-access-key-id")?,
            aws_secret: value("aws-secret-access-key")?,
            aws_token: value("aws-session-token")?,
            gcp_token: value("gcp-access-token")?,
            azure_token: value("azure-access-token")?,
        })
    }

    /// The answer to a request for the endpoint whose head is `head`, or `None` when the
    /// request is not HTTP.
    pub fn answer(&self, head: &[u8]) -> Option<Vec<u8>> {
        let request = request_head(head, 16 << 10)?;
        let (method, header) = (request.method.as_str(), |name: &str| request.header(name));
        let now = std::time::SystemTime::now();
        // AWS writes its credentials' times in ISO 8601, to the second.
        let iso = |t: std::time::SystemTime| {
            jiff::Timestamp::try_from(t)
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default()
        };
        let expires = iso(now + std::time::Duration::from_secs(6 * 3600));
        let path = request.path.split('?').next().unwrap_or_default();
        let (status, content_type, body, extra) = if path.starts_with("/computeMetadata/") {
            // Google Cloud answers only requests that say they want metadata.
            if header("Metadata-Flavor") != Some("Google") {
                (
                    "403 Forbidden",
                    "text/html",
                    "Missing Metadata-Flavor:Google header.".to_string(),
                    "",
                )
            } else {
                match path.trim_end_matches('/') {
                    "/computeMetadata/v1/instance/service-accounts/default/token" => (
                        "200 OK",
                        "application/json",
                        format!(
                            "{{\"access_token\":\"{}\",\"expires_in\":3599,\"token_type\":\"Bearer\"}}",
                            self.gcp_token
                        ),
                        "Metadata-Flavor: Google\r\n",
                    ),
                    "/computeMetadata/v1/project/project-id" => (
                        "200 OK",
                        "application/text",
                        "northfield-prod-4471".into(),
                        "Metadata-Flavor: Google\r\n",
                    ),
                    "/computeMetadata/v1/instance/service-accounts/default/email" => (
                        "200 OK",
                        "application/text",
                        "app-runner@northfield-prod-4471.iam.gserviceaccount.com".into(),
                        "Metadata-Flavor: Google\r\n",
                    ),
                    _ => (
                        "404 Not Found",
                        "text/html",
                        "Not Found".into(),
                        "Metadata-Flavor: Google\r\n",
                    ),
                }
            }
        } else if path.starts_with("/metadata/") {
            // Azure's, the same.
            if header("Metadata") != Some("true") {
                (
                    "400 Bad Request",
                    "application/json",
                    "{\"error\":\"Bad request. Required metadata header not specified\"}".into(),
                    "",
                )
            } else if path == "/metadata/identity/oauth2/token" {
                (
                    "200 OK",
                    "application/json",
                    format!(
                        "{{\"access_token\":\"{}\",\"expires_in\":\"86399\",\"token_type\":\"Bearer\",\"resource\":\"https://management.azure.com/\"}}",
                        self.azure_token
                    ),
                    "",
                )
            } else if path == "/metadata/instance" {
                (
                    "200 OK",
                    "application/json",
                    "{\"compute\":{\"location\":\"westeurope\",\"vmSize\":\"Standard_D2s_v3\"}}"
                        .into(),
                    "",
                )
            } else {
                (
                    "404 Not Found",
                    "application/json",
                    "{\"error\":\"Not found\"}".into(),
                    "",
                )
            }
        } else if method == "PUT" && path == "/latest/api/token" {
            (
                "200 OK",
                "text/plain",
                made_up_session(&self.aws_token),
                "X-Aws-Ec2-Metadata-Token-Ttl-Seconds: 21600\r\n",
            )
        } else {
            let creds = "/latest/meta-data/iam/security-credentials";
            match path.trim_end_matches('/') {
                p if p == creds => ("200 OK", "text/plain", ROLE.into(), ""),
                p if p == format!("{creds}/{ROLE}") => (
                    "200 OK",
                    "text/plain",
                    format!(
                        "{{\n  \"Code\" : \"Success\",\n  \"LastUpdated\" : \"{}\",\n  \"Type\" : \"AWS-HMAC\",\n  \"AccessKeyId\" : \"{}\",\n  \"SecretAccessKey\" : \"{}\",\n  \"Token\" : \"{}\",\n  \"Expiration\" : \"{}\"\n}}",
                        iso(now),
                        self.aws_key_id,
                        self.aws_secret,
                        self.aws_token,
                        expires
                    ),
                    "",
                ),
                "/latest/meta-data" => (
                    "200 OK",
                    "text/plain",
                    "ami-id\nhostname\niam/\ninstance-id\ninstance-type\nlocal-ipv4\nplacement/\n"
                        .into(),
                    "",
                ),
                "/latest/meta-data/iam" => (
                    "200 OK",
                    "text/plain",
                    "info\nsecurity-credentials/\n".into(),
                    "",
                ),
                "/latest/meta-data/instance-id" => {
                    ("200 OK", "text/plain", "i-0b7d3f9a51c2e4468".into(), "")
                }
                "/latest/meta-data/instance-type" => {
                    ("200 OK", "text/plain", "t3.medium".into(), "")
                }
                "/latest/meta-data/placement/region" => {
                    ("200 OK", "text/plain", "us-east-1".into(), "")
                }
                "/latest/meta-data/hostname" | "/latest/meta-data/local-hostname" => (
                    "200 OK",
                    "text/plain",
                    "ip-10-0-3-17.ec2.internal".into(),
                    "",
                ),
                _ => ("404 Not Found", "text/html", "Not Found".into(), ""),
            }
        };
        let date = httpdate::fmt_http_date(now);
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nDate: {date}\r\n{extra}Connection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        if method != "HEAD" {
            out.extend_from_slice(body.as_bytes());
        }
        Some(out)
    }
}

/// A session token for IMDSv2 (not a credential: it only opens the endpoint itself).
fn made_up_session(seed: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update(b"imds session\0")
        .chain_update(seed.as_bytes())
        .finalize();
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(&digest[..])
}

/// Whether a request whose head is `head`, made to `destination`, is one for the metadata
/// endpoint: to its address, or naming it as its host.
pub fn is_endpoint(destination: Option<IpAddr>, head: &[u8]) -> bool {
    if destination.is_some_and(|ip| ADDRESSES.contains(&ip.to_canonical().to_string().as_str())) {
        return true;
    }
    request_head(head, 16 << 10).is_some_and(|h| {
        h.headers.iter().any(|(n, v)| {
            let host = v.rsplit_once(':').map_or(v.as_str(), |(h, _)| h);
            n.eq_ignore_ascii_case("host")
                && (NAMES.contains(&host) || ADDRESSES.contains(&host.trim_matches(['[', ']'])))
        })
    })
}

/// Whether a request whose head is `head` asks the endpoint for credentials (AWS's role
/// credentials, Google Cloud's and Azure's access tokens).
pub fn asks_for_credentials(head: &[u8]) -> bool {
    request_head(head, 16 << 10).is_some_and(|h| {
        let path = h
            .path
            .split('?')
            .next()
            .unwrap_or_default()
            .trim_end_matches('/');
        path.starts_with("/latest/meta-data/iam/security-credentials/")
            || path.ends_with("/service-accounts/default/token")
            || path == "/metadata/identity/oauth2/token"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, extra: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: 169.254.169.254\r\n{extra}\r\n").into_bytes()
    }

    #[test]
    fn each_cloud_gets_its_planted_credentials_the_way_its_clients_ask() {
        let canaries = Canaries::of(5);
        let m = CloudMetadata::of(&canaries).expect("planted");
        let body = |r: Vec<u8>| String::from_utf8(r).expect("utf8");
        let role = body(
            m.answer(&get("/latest/meta-data/iam/security-credentials/", ""))
                .expect("answer"),
        );
        assert!(role.ends_with(ROLE), "{role}");
        let aws = body(
            m.answer(&get(
                &format!("/latest/meta-data/iam/security-credentials/{ROLE}"),
                "",
            ))
            .expect("answer"),
        );
        assert!(
            aws.contains(&m.aws_secret) && aws.contains(&m.aws_token),
            "{aws}"
        );
        let token = body(
            m.answer(b"PUT /latest/api/token HTTP/1.1\r\nX-aws-ec2-metadata-token-ttl-seconds: 21600\r\n\r\n")
                .expect("answer"),
        );
        assert!(token.starts_with("HTTP/1.1 200 OK"), "{token}");
        // Google's and Azure's ask for a header; without it they are refused.
        let gcp = "/computeMetadata/v1/instance/service-accounts/default/token";
        assert!(body(m.answer(&get(gcp, "")).expect("answer")).starts_with("HTTP/1.1 403"));
        let gcp = body(
            m.answer(&get(gcp, "Metadata-Flavor: Google\r\n"))
                .expect("answer"),
        );
        assert!(gcp.contains(&m.gcp_token), "{gcp}");
        let azure = "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/";
        let azure = body(m.answer(&get(azure, "Metadata: true\r\n")).expect("answer"));
        assert!(azure.contains(&m.azure_token), "{azure}");
        // What is and is not the endpoint, and what asks for credentials.
        assert!(is_endpoint("169.254.169.254".parse().ok(), b""));
        assert!(is_endpoint(
            None,
            b"GET / HTTP/1.1\r\nHost: metadata.google.internal\r\n\r\n"
        ));
        assert!(!is_endpoint(
            "198.18.0.3".parse().ok(),
            b"GET / HTTP/1.1\r\nHost: docs.example.test\r\n\r\n"
        ));
        assert!(asks_for_credentials(&get(
            &format!("/latest/meta-data/iam/security-credentials/{ROLE}"),
            ""
        )));
        assert!(!asks_for_credentials(&get(
            "/latest/meta-data/instance-id",
            ""
        )));
        // The session token for IMDSv2 is not one of the planted secrets.
        assert!(canaries.detector().find(token.as_bytes()).is_empty());
    }
}
