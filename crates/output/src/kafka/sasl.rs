//! SASL for Kafka: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), the client
//! side, with ring's HMAC, digests and PBKDF2 (ring is already linked for rustls).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};

use crate::settings::SaslMechanism;

/// PLAIN's one message: `\0user\0password`.
pub fn plain(username: &str, password: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(username.len() + password.len() + 2);
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    out
}

/// A SCRAM exchange in progress.
pub struct Scram {
    mechanism: SaslMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    server_signature: Option<Vec<u8>>,
}

/// Why a SCRAM exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ScramError {
    #[error("server answered an unexpected SCRAM message: {0}")]
    Protocol(String),
    #[error("the server's signature does not match: it does not know the password")]
    ServerSignature,
    #[error("no random source for the SCRAM nonce")]
    Random,
}

/// `=` and `,` escaped as SCRAM's `saslname` wants.
fn sasl_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl Scram {
    /// Starts an exchange; returns it and the client-first message.
    pub fn start(
        mechanism: SaslMechanism,
        username: &str,
        password: &str,
    ) -> Result<(Scram, Vec<u8>), ScramError> {
        let mut raw = [0u8; 24];
        ring::rand::SystemRandom::new()
            .fill(&mut raw)
            .map_err(|_| ScramError::Random)?;
        let nonce = STANDARD.encode(raw);
        Ok(Scram::with_nonce(mechanism, username, password, &nonce))
    }

    fn with_nonce(
        mechanism: SaslMechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> (Scram, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", sasl_name(username));
        let first = format!("n,,{client_first_bare}").into_bytes();
        (
            Scram {
                mechanism,
                password: password.to_owned(),
                client_first_bare,
                nonce: nonce.to_owned(),
                server_signature: None,
            },
            first,
        )
    }

    fn algorithms(
        &self,
    ) -> (
        hmac::Algorithm,
        &'static digest::Algorithm,
        pbkdf2::Algorithm,
    ) {
        match self.mechanism {
            SaslMechanism::ScramSha512 => (
                hmac::HMAC_SHA512,
                &digest::SHA512,
                pbkdf2::PBKDF2_HMAC_SHA512,
            ),
            _ => (
                hmac::HMAC_SHA256,
                &digest::SHA256,
                pbkdf2::PBKDF2_HMAC_SHA256,
            ),
        }
    }

    /// The client-final message for the server-first one.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| ScramError::Protocol("not UTF-8".into()))?;
        let attr = |name: char| {
            text.split(',')
                .find_map(|part| part.strip_prefix(name).and_then(|p| p.strip_prefix('=')))
        };
        if let Some(e) = attr('e') {
            return Err(ScramError::Protocol(format!("error `{e}`")));
        }
        let nonce = attr('r').ok_or_else(|| ScramError::Protocol(text.to_owned()))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::Protocol(
                "the server's nonce does not extend ours".into(),
            ));
        }
        let salt = attr('s')
            .and_then(|s| STANDARD.decode(s).ok())
            .ok_or_else(|| ScramError::Protocol("no salt".into()))?;
        let iterations = attr('i')
            .and_then(|i| i.parse::<u32>().ok())
            .and_then(std::num::NonZeroU32::new)
            .ok_or_else(|| ScramError::Protocol("no iteration count".into()))?;
        if iterations.get() > 1_000_000 {
            return Err(ScramError::Protocol(format!(
                "{iterations} iterations is more than this client computes"
            )));
        }
        let (mac, hash, kdf) = self.algorithms();
        let mut salted = vec![0u8; hash.output_len()];
        pbkdf2::derive(
            kdf,
            iterations,
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let salted_key = hmac::Key::new(mac, &salted);
        let client_key = hmac::sign(&salted_key, b"Client Key");
        let stored_key = digest::digest(hash, client_key.as_ref());
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = hmac::sign(
            &hmac::Key::new(mac, stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(client_signature.as_ref())
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hmac::sign(&salted_key, b"Server Key");
        let server_signature = hmac::sign(
            &hmac::Key::new(mac, server_key.as_ref()),
            auth_message.as_bytes(),
        );
        self.server_signature = Some(server_signature.as_ref().to_vec());
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    /// Checks the server-final message (the server proves it knows the password too).
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = String::from_utf8_lossy(server_final);
        if let Some(e) = text.strip_prefix("e=") {
            return Err(ScramError::Protocol(format!("error `{e}`")));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| STANDARD.decode(v.trim()).ok())
            .ok_or_else(|| ScramError::Protocol(text.to_string()))?;
        match &self.server_signature {
            Some(expected) if *expected == signature => Ok(()),
            _ => Err(ScramError::ServerSignature),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7677_example_exchange() {
        // RFC 7677, section 3: user "user", password "pencil".
        let (mut scram, first) = Scram::with_nonce(
            SaslMechanism::ScramSha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = scram.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(scram.verify(b"v=AAAA").is_err());
        assert!(scram.verify(b"e=invalid-proof").is_err());
    }

    #[test]
    fn names_are_escaped_and_bad_answers_refused() {
        let (mut scram, first) =
            Scram::with_nonce(SaslMechanism::ScramSha512, "a=b,c", "p", "nonce");
        assert_eq!(first, b"n,,n=a=3Db=2Cc,r=nonce");
        assert!(scram.client_final(b"r=other,s=AAAA,i=1").is_err());
        assert!(
            scram.client_final(b"r=nonce,s=AAAA,i=1").is_err(),
            "nonce not extended"
        );
        assert!(scram.client_final(b"e=unknown-user").is_err());
        assert!(scram.client_final(b"r=nonceX,s=AAAA,i=0").is_err());
        assert!(scram.client_final(b"r=nonceX,s=AAAA,i=1").is_ok());
        assert_eq!(plain("u", "p"), b"\0u\0p");
    }
}
