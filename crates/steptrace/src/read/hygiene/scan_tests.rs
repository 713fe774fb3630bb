//! Tests of the label scanner.

use serde_json::{json, Value};

use super::*;
use crate::read::reader::parse_json_trace as parse_trace;

#[test]
fn scan_trace_locates_findings() {
    let json = r#"{"traceEvents":[
        {"ph":"M","name":"process_name","pid":1,"args":{"name":"steptrace: worker-0"}},
        {"ph":"M","name":"thread_name","pid":1,"tid":4,"args":{"name":"/home/alice/worker"}},
        {"ph":"B","name":"load alice@example.org","cat":"io","pid":1,"tid":4,"ts":1,
         "args":{"user":"bob@example.com","nested":{"list":["ok","/Users/carol/x"]},"api_key":"zzz123",
                 "/root/secret.txt":1,"embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6]}},
        {"ph":"E","name":"load alice@example.org","pid":1,"tid":"/home/dan/t","ts":2,
         "args":{"embedding":[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2,1.3,1.4,1.5,1.6]}}
    ],
    "metadata":{"manifest":{"data_path":"/home/erin/data","backend":"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"},
                "partial_reason":"the profiler finished early because the user pressed the stop button in the window",
                "steps":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18],
                "label_warnings":["name looks like Email: al***@***.org"]},
    "otherData":{"note":"see ~/notes.txt"}}"#;
    assert_located(
        json,
        &[
            ("event 2 args./root/secret.txt (key)", FindingKind::HomePath),
            ("event 2 args.api_key", FindingKind::Token),
            ("event 2 args.embedding", FindingKind::InputContent),
            ("event 2 args.nested.list[1]", FindingKind::HomePath),
            ("event 2 args.user", FindingKind::Email),
            ("event 2 name", FindingKind::Email),
            ("event 3 tid", FindingKind::HomePath),
            ("metadata.manifest.data_path", FindingKind::HomePath),
            ("otherData.note", FindingKind::HomePath),
            ("thread name tid 4", FindingKind::HomePath),
        ],
    );
}

#[test]
fn scan_trace_reports_each_string_once_and_masks_it() {
    let events: Vec<String> = (0..50)
        .map(|i| format!(r#"{{"ph":"X","name":"user alice@example.org","ts":{i},"dur":1,"args":{{"step":{i}}}}}"#))
        .collect();
    let json = format!("[{}]", events.join(","));
    let trace = parse_trace(json.as_bytes()).unwrap();
    let found = scan_trace(&trace);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].location, "event 0 name");
    assert_eq!(found[0].to_string(), "event 0 name: e-mail address: al***@***.org");
}

#[test]
fn scan_trace_of_a_clean_trace_is_empty() {
    let json = r#"{"traceEvents":[
        {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"steptrace: worker-0"}},
        {"ph":"M","name":"steptrace_segment","pid":1,"tid":0,"args":{"worker":"worker-0","cycle":0,
          "schedule":"wait=1,warmup=1,active=2,repeat=2","steptrace_version":"0.1.0","manifest":{"model":"mlp"}}},
        {"ph":"B","name":"ProfilerStep#2","cat":"steptrace","pid":1,"tid":1,"ts":10,"args":{"step":2}},
        {"ph":"X","name":"cubecl_runtime::client::launch_inner","pid":1,"tid":1,"ts":11,"dur":3,
         "args":{"kernel.name":"fusion<cubecl<cuda>>","shape":"[32, 128, 768]"}},
        {"ph":"E","name":"ProfilerStep#2","pid":1,"tid":1,"ts":20,"args":{"steptrace.clipped":"end"}}
    ],"displayTimeUnit":"ms","metadata":{
        "steptrace_version":"0.1.0","format":"steptrace-chrome-trace/1","host_os":"linux","host_arch":"x86_64",
        "schedule":{"text":"wait=1,warmup=1,active=2,repeat=2","wait":1},
        "steps":[2,3],"expected_steps":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20],
        "partial":true,"partial_reason":"the profiler finished inside the cycle: 1 of 2 active steps recorded",
        "clock":{"ts_unit":"us","epoch_unix_ms":1714567890123},
        "label_warnings":["name looks like Email: al***@***.org","args.path looks like HomePath: /home/al***/…"],
        "manifest":{"model":"mlp","backend":"wgpu (FALLBACK: CUDA unavailable: libcuda.so not found)"}}}"#;
    let trace = parse_trace(json.as_bytes()).unwrap();
    assert_eq!(scan_trace(&trace), []);
}

#[test]
fn personal_numbers_and_shares_are_found_wherever_labels_are() {
    let json = r#"{"traceEvents":[
        {"ph":"X","name":"charge 4111-1111-1111-1111","ts":1,"dur":2,"pid":1,"tid":1,
         "args":{"ssn":"078-05-1120","DE89 3704 0044 0532 0130 00":1,"share":"\\\\nas01\\finance\\q3.xlsx",
                 "escaped":"\\\\\\\\nas01\\\\finance","home":"~alice/data","pan":5555555555554444}},
        {"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"worker 219-09-9999"}}
    ],"metadata":{"manifest":{"account":"GB82WEST12345698765432"}}}"#;
    assert_located(
        json,
        &[
            ("event 0 args.DE89 3704 0044 0532 0130 00 (key)", FindingKind::Iban),
            ("event 0 args.escaped", FindingKind::NetworkPath),
            ("event 0 args.home", FindingKind::HomePath),
            ("event 0 args.pan", FindingKind::Card),
            ("event 0 args.share", FindingKind::NetworkPath),
            ("event 0 args.ssn", FindingKind::NationalId),
            ("event 0 name", FindingKind::Card),
            ("metadata.manifest.account", FindingKind::Iban),
            ("thread name tid 2", FindingKind::NationalId),
        ],
    );
    // Excerpts keep none of it.
    let trace = parse_trace(json.as_bytes()).unwrap();
    for f in scan_trace(&trace) {
        for secret in ["1111-1111", "05-1120", "3704", "nas01", "alice", "5554444", "WEST123"] {
            assert!(!f.finding.excerpt.contains(secret), "{f}");
        }
    }
    // The sink's checks see them too, numbers among the arguments included.
    let mut scanner = LabelScanner::with_limit(4096);
    scanner.event(
        Some("pay"),
        Some(&json!({ "card": 4111111111111111_u64, "ts": 1714567890123451_u64, "dur_ns": 4111111111119_u64 })),
    );
    scanner.tool_value("manifest", &json!({ "card": 378282246310005_u64, "share": "\\\\nas01\\x" }));
    let mut warnings = scanner.into_warnings();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "card looks like Card: 4*** (16 digits)",
            "manifest.card looks like Card: 3*** (15 digits)",
            r"manifest.share looks like NetworkPath: \\na***\…",
        ]
    );
}

#[test]
fn excerpts_of_number_lists_hide_long_numbers() {
    let json = r#"[{"ph":"X","name":"a","ts":1,"dur":2,"args":{"ids":[4111111111111111,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],
        "text":"5555555555554444, 1, 2, 3, 4, 5, 6, 7"}}]"#;
    let trace = parse_trace(json.as_bytes()).unwrap();
    let mut excerpts: Vec<String> = scan_trace(&trace).into_iter().map(|f| f.finding.excerpt).collect();
    excerpts.sort();
    assert_eq!(
        excerpts,
        ["4*** (16 digits)", "5*** (16 digits)", "[***, 1, …] (8 numbers)", "[***, 2, …] (16 numbers)"]
    );
}

/// A trace as steptrace writes one of a wgpu run with `--detail ops`: kernels timed by cubecl,
/// attributed by span and by module tree, and the metadata's `device_activity`, all built from
/// the format's types. `manifest` is the run's manifest.
fn device_trace(manifest: crate::format::Manifest, kernel_extra: Option<(&str, &str)>) -> String {
    use crate::format::device::{attribution, DeviceActivity, KernelArgs, KernelAttribution};
    use crate::format::{FormatVersion, TraceMetadata};

    let kernel = |name: &str, timing: &str, how: &str, span: Option<&str>| {
        let mut a = KernelAttribution::not_attributed(how);
        if attribution::is_attributed(how) {
            a.op_kind = Some("matmul".into());
            a.ops = Some("Matmul [256, 512]; Add".into());
            a.span = span.map(str::to_owned);
            a.phase = span.map(|s| s.split(" > ").next().unwrap_or(s).to_owned());
        }
        let mut args = KernelArgs { correlation: 7, ..KernelArgs::default() };
        args.timing = Some(timing.to_owned());
        args.attribution = Some(a);
        json!({"ph": "X", "cat": "kernel", "name": name, "pid": 100, "tid": 0, "ts": 10, "dur": 5, "args": args})
    };
    let timed = "timestamp queries";
    let host = "host clock around a blocking submit (not the kernel's own time)";
    let cuda_events = "CUDA events (a window around the launch, longer than the kernel)";
    let events = json!([
        kernel("matmul_fwd", timed, attribution::MODULE, Some("forward > blocks.1.linear")),
        kernel("matmul_bwd", timed, attribution::MODULE_INFERRED, Some("backward > blocks.1.linear")),
        kernel("matmul_opt", host, attribution::OUTSIDE_SPANS, None),
        kernel("fused_fwd", cuda_events, attribution::CALLED, Some("forward")),
        kernel("autotune", timed, attribution::NO_BLOCK, None),
        kernel("late", timed, attribution::NOTES_FULL, None),
    ]);
    let mut events = events.as_array().cloned().unwrap_or_default();
    if let Some((key, value)) = kernel_extra {
        events.push(json!({"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
            "args": { key: value }}));
    }
    let mut activity = DeviceActivity::not_observed("");
    activity.status = crate::format::device::ActivityStatus::Observed;
    activity.source = Some("cubecl's kernel timing: timestamp queries".into());
    activity.kinds = vec!["kernel (timed by cubecl: timestamp queries where the device has them)".into()];
    activity.written.insert("kernel".into(), json!(6));
    activity.problems = vec![
        "device timestamps are placed on the host clock by their launches (each kernel starts no earlier than its \
         launch; the largest launch lead sets the offset): lengths and gaps are the device's, positions against host \
         spans are estimates"
            .into(),
        "launch records not collected: kernels are timed through cubecl's launch observer: there is no driver \
         record of their launches"
            .into(),
    ];
    activity.collector_us.insert("open activity kinds".into(), json!(12.5));
    let metadata = TraceMetadata {
        format: FormatVersion::CURRENT.to_string(),
        steptrace_version: "0.1.0".into(),
        manifest,
        device_activity: Some(activity),
        ..TraceMetadata::default()
    };
    json!({"traceEvents": events, "metadata": metadata}).to_string()
}

fn wgpu_manifest() -> crate::format::Manifest {
    crate::format::Manifest {
        model: Some("mlp".into()),
        backend: Some("wgpu (Vulkan)".into()),
        backend_kind: Some("wgpu".into()),
        sync_policy: Some("step".into()),
        sync_meaning: Some(
            "one sync at the end of each step: ProfilerStep#N is the true step time and phase spans are host \
             launch time"
                .into(),
        ),
        ..crate::format::Manifest::default()
    }
}

#[test]
fn steptraces_own_device_metadata_and_kernel_words_are_not_input_content() {
    assert_eq!(located(&device_trace(wgpu_manifest(), None)), []);
}

#[test]
fn secrets_and_input_content_beside_steptraces_own_words_are_still_flagged() {
    let prose = |what: &str| format!("The quick brown fox jumps over the lazy {what} and then runs into the forest");
    let mut manifest = wgpu_manifest();
    manifest.notes = vec!["data from /home/alice/private/set".into()];
    manifest.set("dataset_ref", json!("ghp_abcdefghijklmnopqrstuvwxyz0123456789")).unwrap();
    manifest.set("sample", json!(prose("dog"))).unwrap();
    // The words of a kernel's own fields are the user's anywhere else.
    let mut json: Value = serde_json::from_str(&device_trace(manifest, Some(("timing", &prose("cat"))))).unwrap();
    // A path or a key in steptrace's own fields is still a finding.
    let kinds = json["metadata"]["device_activity"]["kinds"].as_array_mut().unwrap();
    kinds.push(json!("kernel (CUPTI from /home/bob/cupti/lib64)"));
    json["traceEvents"][0]["args"]["attribution"] = json!("glpat-abcdefghij0123456789");
    // A user's span name is the user's.
    json["traceEvents"][1]["args"]["span"] = json!(prose("cow"));
    assert_located(
        &json.to_string(),
        &[
            ("event 0 args.attribution", FindingKind::Token),
            ("event 1 args.span", FindingKind::InputContent),
            ("event 6 args.timing", FindingKind::InputContent),
            ("metadata.device_activity.kinds[1]", FindingKind::HomePath),
            ("metadata.manifest.dataset_ref", FindingKind::Token),
            ("metadata.manifest.notes[0]", FindingKind::HomePath),
            ("metadata.manifest.sample", FindingKind::InputContent),
        ],
    );
}
