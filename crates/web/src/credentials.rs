//! Who may log in: the configured users with their bcrypt hashes, and the cache of successful
//! checks. Shared by the auth layer (which checks) and the reloader (which replaces the users).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a successful check is remembered.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// At most this many remembered checks; beyond it, expired ones are dropped, then all.
const CACHE_CAP: usize = 1024;
/// bcrypt runs at most this many at once (CPU bound, ~70 ms each at cost 10). The toolkit
/// serialises them with one mutex; two keeps one slow client from stalling the others.
pub(crate) const BCRYPT_CONCURRENCY: usize = 2;

/// Remembered successful (user, hash, password) checks, by salted digest.
pub(crate) struct CredentialCache {
    salt: Option<[u8; 32]>,
    entries: Mutex<HashMap<[u8; 32], Instant>>,
}

impl CredentialCache {
    pub(crate) fn new() -> Self {
        use ring::rand::SecureRandom;
        let mut salt = [0u8; 32];
        // Without randomness there is no salt, and then no cache: every check runs bcrypt.
        let salt = ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .ok()
            .map(|()| salt);
        CredentialCache {
            salt,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn key(&self, user: &[u8], hash: &str, password: &[u8]) -> Option<[u8; 32]> {
        let salt = self.salt?;
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&salt);
        for part in [user, hash.as_bytes(), password] {
            // Length prefixes keep ("ab","c") and ("a","bc") apart.
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        Some(out)
    }

    pub(crate) fn hit(&self, key: &[u8; 32]) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).is_some_and(|t| t.elapsed() < CACHE_TTL)
    }

    pub(crate) fn remember(&self, key: [u8; 32]) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_CAP {
            entries.retain(|_, t| t.elapsed() < CACHE_TTL);
            if entries.len() >= CACHE_CAP {
                entries.clear();
            }
        }
        entries.insert(key, Instant::now());
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// The users of one loaded config, with the dummy hash for unknown names.
#[derive(Debug, Clone)]
pub(crate) struct Users {
    pub hashes: Vec<(String, String)>,
    pub dummy_hash: String,
}

impl Users {
    /// Builds the dummy hash at the highest cost in use so that unknown users cost as much as
    /// known ones. Blocking (one bcrypt hash).
    pub(crate) fn new(users: &std::collections::BTreeMap<String, String>) -> Self {
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let mut secret = [0u8; 16];
        {
            use ring::rand::SecureRandom;
            let _ = ring::rand::SystemRandom::new().fill(&mut secret);
        }
        // If hashing fails the dummy stays unparsable and verify() answers false: still a 401.
        let dummy_hash = bcrypt::hash(secret, cost).unwrap_or_default();
        Users {
            hashes: users.iter().map(|(u, h)| (u.clone(), h.clone())).collect(),
            dummy_hash,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_differ_per_part_and_are_bounded() {
        let c = CredentialCache::new();
        let a = c.key(b"ab", "h", b"c");
        let b = c.key(b"a", "h", b"bc");
        assert!(a.is_some());
        assert_ne!(a, b);
        for i in 0..(CACHE_CAP + 10) {
            if let Some(k) = c.key(b"u", "h", i.to_string().as_bytes()) {
                c.remember(k);
            }
        }
        assert!(c.len() <= CACHE_CAP);
    }
}
