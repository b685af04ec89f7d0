//! Where an implicit region entered its pool, as data: the call site (function, file, line,
//! calling function) and the kind of entry, read from the region's site record; and the one
//! name every view shows for a site, built from those fields.

use parprof_rt::trace::{EntryKind, SiteKind, SiteRecord};
use serde::Serialize;

/// The call site of an implicit region: the innermost function of the program's own on the
/// stack of the thread that entered the pool, and the next one up (none when only the standard
/// library or rayon called it, as for `main`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallSite {
    pub function: String,
    /// Relative to the crate's source folder (`src/main.rs`); empty when unknown.
    pub file: String,
    /// 0 when unknown.
    pub line: u32,
    pub caller: Option<String>,
}

/// How a region's work entered the pool: a `parallel_region!` names it, or the rayon call
/// that entered it from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionKind {
    Named,
    Join,
    Iterator,
    Scope,
    Spawn,
    Install,
    Broadcast,
}

impl RegionKind {
    pub fn label(self) -> &'static str {
        match self {
            RegionKind::Named => "named",
            RegionKind::Join => "join",
            RegionKind::Iterator => "iterator",
            RegionKind::Scope => "scope",
            RegionKind::Spawn => "spawn",
            RegionKind::Install => "install",
            RegionKind::Broadcast => "broadcast",
        }
    }
}

/// A region site's call site; `None` for named regions, probes, and the implicit regions of
/// traces written before call sites were recorded as fields (their name holds the location).
pub fn call_site(site: &SiteRecord) -> Option<CallSite> {
    site.entry?;
    Some(CallSite {
        function: site.name.clone(),
        file: site.file.clone(),
        line: site.line,
        caller: (!site.caller.is_empty()).then(|| site.caller.clone()),
    })
}

/// A region site's kind (`None`: an implicit region of an older trace, or not a region).
pub fn region_kind(site: &SiteRecord) -> Option<RegionKind> {
    match (site.kind, site.entry) {
        (SiteKind::Region, _) => Some(RegionKind::Named),
        (_, Some(EntryKind::Join)) => Some(RegionKind::Join),
        (_, Some(EntryKind::Iterator)) => Some(RegionKind::Iterator),
        (_, Some(EntryKind::Scope)) => Some(RegionKind::Scope),
        (_, Some(EntryKind::Spawn)) => Some(RegionKind::Spawn),
        (_, Some(EntryKind::Install)) => Some(RegionKind::Install),
        (_, Some(EntryKind::Broadcast)) => Some(RegionKind::Broadcast),
        (_, None) => None,
    }
}

/// The name a site is shown by: a probe's or named region's own name; an implicit region's
/// `function (file:line, from caller)`, where the caller, named by its last segment, is left
/// out when it is `main` (a helper called from several functions is a region per caller).
pub fn display_name(site: &SiteRecord) -> String {
    match call_site(site) {
        Some(c) => call_site_name(&c),
        None => site.name.clone(),
    }
}

fn call_site_name(c: &CallSite) -> String {
    let caller = c
        .caller
        .as_deref()
        .map(|c| c.rsplit("::").next().unwrap_or(c))
        .filter(|&c| c != "main");
    let function = &c.function;
    let (file, line) = (&c.file, c.line);
    match (line, caller) {
        (0, None) => function.clone(),
        (0, Some(c)) => format!("{function} (from {c})"),
        (_, None) => format!("{function} ({file}:{line})"),
        (_, Some(c)) => format!("{function} ({file}:{line}, from {c})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn implicit(name: &str, line: u32, caller: &str, entry: EntryKind) -> SiteRecord {
        SiteRecord {
            id: 7,
            kind: SiteKind::ImplicitRegion,
            name: name.into(),
            file: "src/lib.rs".into(),
            line,
            caller: caller.into(),
            entry: Some(entry),
        }
    }

    #[test]
    fn an_implicit_region_is_named_from_its_call_site_fields() {
        let site = implicit("app::sort", 27, "app::run", EntryKind::Join);
        assert_eq!(display_name(&site), "app::sort (src/lib.rs:27, from run)");
        assert_eq!(region_kind(&site), Some(RegionKind::Join));
        assert_eq!(
            call_site(&site),
            Some(CallSite {
                function: "app::sort".into(),
                file: "src/lib.rs".into(),
                line: 27,
                caller: Some("app::run".into()),
            })
        );
        // Entered from `main`, or with no caller of the program's: no caller shown.
        let from_main = implicit("app::main", 12, "", EntryKind::Spawn);
        assert_eq!(display_name(&from_main), "app::main (src/lib.rs:12)");
        let main_caller = implicit("app::trial", 12, "app::main", EntryKind::Spawn);
        assert_eq!(display_name(&main_caller), "app::trial (src/lib.rs:12)");
        // No debug information: no location.
        assert_eq!(
            display_name(&implicit(
                "rayon::slice::mergesort::par_mergesort",
                0,
                "",
                EntryKind::Iterator
            )),
            "rayon::slice::mergesort::par_mergesort"
        );
    }

    #[test]
    fn named_regions_and_older_traces_keep_their_names() {
        let named = SiteRecord {
            id: 1,
            kind: SiteKind::Region,
            name: "sum_rows".into(),
            file: "src/app.rs".into(),
            line: 40,
            caller: String::new(),
            entry: None,
        };
        assert_eq!(display_name(&named), "sum_rows");
        assert_eq!(region_kind(&named), Some(RegionKind::Named));
        assert_eq!(call_site(&named), None);
        let older = SiteRecord {
            kind: SiteKind::ImplicitRegion,
            name: "app::sort (src/lib.rs:27, from run)".into(),
            ..named
        };
        assert_eq!(display_name(&older), "app::sort (src/lib.rs:27, from run)");
        assert_eq!(region_kind(&older), None);
    }
}
