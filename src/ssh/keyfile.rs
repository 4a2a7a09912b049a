//! Reading an identity file, including the one valid OpenSSH key the ssh-key
//! crate refuses.
//!
//! OpenSSH writes an ECDSA private scalar as an `mpint` (ssh-ecdsa.c,
//! ssh_ecdsa_serialize_private → sshbuf_put_bignum2, which drops leading
//! zero bytes). So a P-256 scalar below 2^248, one key in 256, is stored in
//! 31 bytes. ssh-key 0.7.0-rc.11 (src/private/ecdsa.rs, EcdsaPrivateKey's
//! Decode) refuses any scalar under 32 bytes with "length invalid". That
//! key is the operator's own and works with `ssh`, so when ssh-key refuses
//! one, fleetctl reads the file's envelope itself. The KDF and the cipher
//! stay ssh-key's, and only the scalar is padded back to the curve's size.
//! The crate refused 2 of 400 keys ssh-keygen 9.2 made, and every refused
//! key had a 31-byte scalar.

use russh::keys::ssh_key::encoding::{self, Decode, DecodePem as _, Reader};
use russh::keys::ssh_key::private::{EcdsaKeypair, EcdsaPrivateKey, KeypairData};
use russh::keys::ssh_key::public::{EcdsaPublicKey, KeyData};
use russh::keys::ssh_key::{self, Cipher, Kdf, PrivateKey, cipher::Tag};
use zeroize::Zeroizing;

/// The key in `text`, decrypted with `passphrase`. The errors are russh's,
/// so callers can still tell an encrypted key from a broken one.
pub fn decode(text: &str, passphrase: Option<&str>) -> Result<PrivateKey, russh::keys::Error> {
    match russh::keys::decode_secret_key(text, passphrase) {
        Err(
            refused @ russh::keys::Error::SshKey(ssh_key::Error::Encoding(encoding::Error::Length)),
        ) => short_ecdsa(text, passphrase).ok_or(refused),
        other => other,
    }
}

/// An OpenSSH ECDSA key whose scalar is shorter than its curve's size, or
/// None when `text` is anything else (the caller keeps the original error).
fn short_ecdsa(text: &str, passphrase: Option<&str>) -> Option<PrivateKey> {
    let file = Envelope::decode_pem(text).ok()?;
    let mut private = file.private.clone();
    if file.cipher.is_some() {
        let (key, iv) = file
            .kdf
            .derive_key_and_iv(file.cipher, passphrase?.as_bytes())
            .ok()?;
        file.cipher
            .decrypt(&key, &iv, &mut private, file.tag)
            .ok()?;
    }
    let mut reader = &private[..];
    // Equal check words are how OpenSSH tells a right passphrase from a wrong one.
    if u32::decode(&mut reader).ok()? != u32::decode(&mut reader).ok()? {
        return None;
    }
    let algorithm = String::decode(&mut reader).ok()?;
    if !algorithm.starts_with("ecdsa-sha2-nistp") {
        return None;
    }
    let _curve = String::decode(&mut reader).ok()?;
    let point = Vec::<u8>::decode(&mut reader).ok()?;
    let scalar = Zeroizing::new(Vec::<u8>::decode(&mut reader).ok()?);
    let comment = String::decode(&mut reader).ok()?;
    let public = EcdsaPublicKey::from_sec1_bytes(&point).ok()?;
    // The envelope's public half must be the same key as the private half.
    if KeyData::Ecdsa(public) != file.public {
        return None;
    }
    let keypair = match public {
        EcdsaPublicKey::NistP256(public) => EcdsaKeypair::NistP256 {
            public,
            private: EcdsaPrivateKey::from(*padded::<32>(&scalar)?),
        },
        EcdsaPublicKey::NistP384(public) => EcdsaKeypair::NistP384 {
            public,
            private: EcdsaPrivateKey::from(*padded::<48>(&scalar)?),
        },
        EcdsaPublicKey::NistP521(public) => EcdsaKeypair::NistP521 {
            public,
            private: EcdsaPrivateKey::from(*padded::<66>(&scalar)?),
        },
    };
    PrivateKey::new(KeypairData::Ecdsa(keypair), comment).ok()
}

/// An unsigned big-endian `mpint` left-padded to exactly `SIZE` bytes,
/// wiped when dropped: it is the private key. (The copy handed to
/// `EcdsaPrivateKey::from` is the key's own, which wipes itself on drop.)
fn padded<const SIZE: usize>(mpint: &[u8]) -> Option<Zeroizing<[u8; SIZE]>> {
    let start = mpint.iter().position(|&b| b != 0).unwrap_or(mpint.len());
    let digits = &mpint[start..];
    if digits.is_empty() || digits.len() > SIZE || mpint.first().is_some_and(|&b| b >= 0x80) {
        return None;
    }
    let mut out = Zeroizing::new([0u8; SIZE]);
    out[SIZE - digits.len()..].copy_from_slice(digits);
    Some(out)
}

/// The `openssh-key-v1` envelope (OpenSSH's PROTOCOL.key), its private
/// section left as bytes, still encrypted when `cipher` is not none (and
/// wiped when dropped: unencrypted, it is the key itself).
struct Envelope {
    cipher: Cipher,
    kdf: Kdf,
    public: KeyData,
    private: Zeroizing<Vec<u8>>,
    tag: Option<Tag>,
}

const MAGIC: &[u8] = b"openssh-key-v1\0";

impl encoding::pem::PemLabel for Envelope {
    const PEM_LABEL: &'static str = "OPENSSH PRIVATE KEY";
}

impl Decode for Envelope {
    type Error = ssh_key::Error;

    fn decode(reader: &mut impl Reader) -> Result<Self, ssh_key::Error> {
        let mut magic = [0u8; MAGIC.len()];
        reader.read(&mut magic)?;
        if magic != MAGIC {
            return Err(ssh_key::Error::FormatEncoding);
        }
        let cipher = Cipher::decode(reader)?;
        let kdf = Kdf::decode(reader)?;
        if usize::decode(reader)? != 1 {
            return Err(encoding::Error::Length.into());
        }
        let public = reader.read_prefixed(KeyData::decode)?;
        let private = Zeroizing::new(Vec::<u8>::decode(reader)?);
        let tag = if cipher.has_tag() {
            let mut tag = Tag::default();
            reader.read(&mut tag)?;
            Some(tag)
        } else {
            None
        };
        Ok(Envelope {
            cipher,
            kdf,
            public,
            private,
            tag,
        })
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    // One key ssh-keygen 9.2 made (`ssh-keygen -t ecdsa`) whose private
    // scalar OpenSSH stored in 31 bytes; then the same key re-encrypted with
    // `ssh-keygen -p -N 'correct horse'`, with the default aes256-ctr and
    // with `-Z aes256-gcm@openssh.com`. A throwaway test key.
    pub(crate) const SHORT: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAaAAAABNlY2RzYS
1zaGEyLW5pc3RwMjU2AAAACG5pc3RwMjU2AAAAQQQDcv7UKawW/v3I09sSryx+dU7DNTPG
sfxnk7jtEf+34nAZggon5j03I1xCIpT2PpEHW52/yau3C+hHPk4VZn7zAAAAsMO4wsfDuM
LHAAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBANy/tQprBb+/cjT
2xKvLH51TsM1M8ax/GeTuO0R/7ficBmCCifmPTcjXEIilPY+kQdbnb/Jq7cL6Ec+ThVmfv
MAAAAfaYDTob2s3Yuv+RcTfH44wn+mNOlckKqQ3AIfMXZsJgAAABVmbGVldGN0bC1zaG9y
dC1zY2FsYXIBAgME
-----END OPENSSH PRIVATE KEY-----
";
    pub(crate) const SHORT_PUB: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBANy/tQprBb+/cjT2xKvLH51TsM1M8ax/GeTuO0R/7ficBmCCifmPTcjXEIilPY+kQdbnb/Jq7cL6Ec+ThVmfvM= fleetctl-short-scalar";
    pub(crate) const SHORT_AES_CTR: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABDwwVNACM
NjZ+eLCoWAe0OUAAAAEAAAAAEAAABoAAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlz
dHAyNTYAAABBBANy/tQprBb+/cjT2xKvLH51TsM1M8ax/GeTuO0R/7ficBmCCifmPTcjXE
IilPY+kQdbnb/Jq7cL6Ec+ThVmfvMAAACwFC3MowmJYp8p7scWvcmuxJbmRnHpbmDFSjiL
vAKVetVOEtXNktucO7P+JmJi/iC1qWkihTCgoXR+dWMtadRJDxdUb1EA3apQqFJav7hzuQ
OdslvXERMyajO+16jn4O/0lVG1bh4z14ZlDYkaEhktuMk0pbEsttbRAD6migFdwJOLDbUI
aWFTL8+L1GXPG0zMZ8P69aNmuxybwZxd99IgtgM5aXHbKhPcROLNHv/71aM=
-----END OPENSSH PRIVATE KEY-----
";
    pub(crate) const SHORT_AES_GCM: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAAFmFlczI1Ni1nY21Ab3BlbnNzaC5jb20AAAAGYmNyeXB0AA
AAGAAAABBRyfN1Ua8hYz3wjp7Cj5zzAAAAEAAAAAEAAABoAAAAE2VjZHNhLXNoYTItbmlz
dHAyNTYAAAAIbmlzdHAyNTYAAABBBANy/tQprBb+/cjT2xKvLH51TsM1M8ax/GeTuO0R/7
ficBmCCifmPTcjXEIilPY+kQdbnb/Jq7cL6Ec+ThVmfvMAAACwPx9c6dhxqFdfj4HxnXos
undRGEzVi3by8+M5QEznnA9+sqK6DASrAOue/BhQRCVJIAW1BFwz0E6t7Yj+mKf31RsOML
ljvsfFYzZXV8Jdz5irwTk2a+cfkLq276Bioni6muxgElSGSfhlCK0dhrcpGfgwAiEEcpsG
hHzDXD/m/ONhkLl0UB+rGRr+ePd7KCwkGz81+CzyPURvsGMRepfgInI1p/+odd7kdtzDES
EYTwjxzRTk+cL1tDJyXoLHV0F8
-----END OPENSSH PRIVATE KEY-----
";
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    fn is_length_error(result: Result<PrivateKey, russh::keys::Error>) -> bool {
        matches!(
            result,
            Err(russh::keys::Error::SshKey(ssh_key::Error::Encoding(
                encoding::Error::Length
            )))
        )
    }

    #[test]
    fn the_crate_alone_refuses_the_short_scalar_key() {
        // Why this module exists: if ssh-key learns to read these keys, this
        // fails and the module can go.
        assert!(is_length_error(russh::keys::decode_secret_key(SHORT, None)));
        assert!(is_length_error(russh::keys::decode_secret_key(
            SHORT_AES_CTR,
            Some("correct horse")
        )));
    }

    #[test]
    fn a_short_scalar_key_reads_plain_and_encrypted_and_matches_its_public_key() {
        let public = russh::keys::ssh_key::PublicKey::from_openssh(SHORT_PUB).unwrap();
        for (text, passphrase) in [
            (SHORT, None),
            (SHORT_AES_CTR, Some("correct horse")),
            (SHORT_AES_GCM, Some("correct horse")),
        ] {
            let key = decode(text, passphrase).unwrap();
            assert_eq!(key.public_key().key_data(), public.key_data());
            assert_eq!(key.comment().as_str_lossy(), "fleetctl-short-scalar");
            // The padded scalar really is the private half of that public key.
            let signature = key
                .sign("fleetctl", ssh_key::HashAlg::Sha256, b"proof")
                .unwrap();
            public
                .verify("fleetctl", b"proof", &signature)
                .expect("a signature by the mended key verifies");
        }
    }

    #[test]
    fn a_wrong_or_missing_passphrase_still_fails_as_before() {
        assert!(matches!(
            decode(SHORT_AES_CTR, None),
            Err(russh::keys::Error::KeyIsEncrypted)
        ));
        assert!(decode(SHORT_AES_CTR, Some("wrong")).is_err());
        assert!(decode(SHORT_AES_GCM, Some("wrong")).is_err());
    }

    #[test]
    fn a_corrupt_file_is_refused_not_mended() {
        // Flip one byte of the public point inside the private section: the
        // halves no longer match, so the mend must give up.
        let mut lines: Vec<String> = SHORT.lines().map(str::to_string).collect();
        assert!(lines[5].contains("ifmPTcj"), "the line holding the point");
        lines[5] = lines[5].replacen("ifmPTcj", "ifmQTcj", 1);
        let corrupt = lines.join("\n");
        assert!(short_ecdsa(SHORT, None).is_some());
        assert!(short_ecdsa(&corrupt, None).is_none());
        assert!(decode(&corrupt, None).is_err());
        assert!(decode("not a key", None).is_err());
    }

    #[test]
    fn padding_keeps_the_value_and_refuses_what_does_not_fit() {
        let wiped_on_drop: Option<Zeroizing<[u8; 4]>> = padded::<4>(&[1, 2, 3]);
        assert_eq!(wiped_on_drop.as_deref(), Some(&[0, 1, 2, 3]));
        assert_eq!(
            padded::<4>(&[0, 0x80, 1, 2, 3]).as_deref(),
            Some(&[0x80, 1, 2, 3])
        );
        assert_eq!(padded::<4>(&[1, 2, 3, 4, 5]), None);
        assert_eq!(padded::<4>(&[0x80]), None, "a negative mpint");
        assert_eq!(padded::<4>(&[]), None, "zero is no private key");
    }
}
