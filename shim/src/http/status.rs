//! `http.json` in the state directory while the endpoint serves: what `cubactl daemon status`
//! shows and what `cubactl http stop` stops. Removed when serving ends.

use std::path::PathBuf;

pub struct Written(Option<PathBuf>);

/// The file's name in the state directory.
pub const FILE: &str = "http.json";

impl Written {
    pub fn new(url: &str, public: Option<&str>) -> Written {
        let dir = cuba_protocol::paths::state_dir();
        let doc = serde_json::json!({
            "pid": std::process::id(),
            "url": url,
            "public_url": public,
            "started_ms": cuba_protocol::now_ms(),
        });
        let path = dir.join(FILE);
        let written = cuba_protocol::safe_fs::owner_only_dir()
            .recursive(true)
            .create(&dir)
            .and_then(|()| cuba_protocol::safe_fs::write_new(&path, doc.to_string().as_bytes()));
        match written {
            Ok(()) => Written(Some(path)),
            Err(e) => {
                tracing::warn!("cannot write {}: {e}", path.display());
                Written(None)
            }
        }
    }
}

impl Drop for Written {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}
