//! Golden-file discipline shared by the project's snapshot tests.

/// Fails the calling test when it runs on CI (as insta detects CI) with an
/// environment that would make insta write or accept snapshots: on CI, snapshots are
/// only compared. insta's default already writes nothing there; this refuses
/// `INSTA_UPDATE` other than `auto`/`no`, `INSTA_FORCE_PASS` other than `0`, and
/// `INSTA_FORCE_UPDATE`/`INSTA_FORCE_UPDATE_SNAPSHOTS` set to `1`.
///
/// # Panics
/// In exactly those cases: that is its purpose.
pub fn refuse_snapshot_updates_on_ci() {
    let var = |name: &str| std::env::var(name).ok();
    let ci = match var("CI").as_deref() {
        Some("" | "0" | "false") => false,
        Some(_) => true,
        None => var("TF_BUILD").is_some(),
    };
    if !ci {
        return;
    }
    if let Some(update) = var("INSTA_UPDATE") {
        assert!(
            matches!(update.as_str(), "" | "auto" | "no"),
            "INSTA_UPDATE={update:?} on CI: snapshots are never written or accepted on CI"
        );
    }
    if let Some(force) = var("INSTA_FORCE_PASS") {
        assert!(
            force == "0",
            "INSTA_FORCE_PASS={force:?} on CI: snapshots are never written or accepted on CI"
        );
    }
    for name in ["INSTA_FORCE_UPDATE", "INSTA_FORCE_UPDATE_SNAPSHOTS"] {
        assert!(
            var(name).as_deref() != Some("1"),
            "{name}=1 on CI: snapshots are never written or accepted on CI"
        );
    }
}
