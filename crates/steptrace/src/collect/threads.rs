//! steptrace's own thread ids and the tagged categories that carry them
//! through tracing-chrome (see [`format::tag`](crate::format::tag)).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
static THREAD_NAMES: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// steptrace's id for this thread: unique in the process, unlike
    /// tracing-chrome's tids, which restart with each Chrome layer while a
    /// thread keeps the tid its first layer gave it.
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

/// This thread's steptrace id, registering its name on first use.
pub(crate) fn thread_id() -> u64 {
    THREAD_ID.with(|id| {
        if id.get() == 0 {
            let new = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            let name = std::thread::current().name().map(str::to_owned).unwrap_or_else(|| format!("thread {new}"));
            if let Ok(mut names) = THREAD_NAMES.lock() {
                names.insert(new, name);
            }
            id.set(new);
        }
        id.get()
    })
}

/// The registered name of a steptrace thread id.
pub(crate) fn thread_name(id: u64) -> Option<String> {
    THREAD_NAMES.lock().ok()?.get(&id).cloned()
}

thread_local! {
    /// Tagged categories already built on this thread, by target.
    static CATEGORIES: RefCell<Vec<(&'static str, String)>> = const { RefCell::new(Vec::new()) };
}

/// The category tracing-chrome writes: the target, tagged with the thread.
///
/// Built once per thread and target (targets are `'static`), then cloned.
pub(crate) fn tagged_category(target: &'static str) -> String {
    CATEGORIES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((_, tagged)) = cache.iter().find(|(t, _)| std::ptr::eq(*t, target)) {
            return tagged.clone();
        }
        let tagged = crate::format::tag::encode(target, thread_id());
        if cache.len() < 256 {
            cache.push((target, tagged.clone()));
        }
        tagged
    })
}
