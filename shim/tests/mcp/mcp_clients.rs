//! Replies shaped per client (`clients.rs`, docs/clients.md), through the real binary and
//! rmcp's client under each client's `clientInfo.name`: text only for the clients that show
//! structured content in place of the text, no `isError` for the one that dumps such results,
//! the settings that override the choice, the arguments clients add, and the result size a
//! raised output bound declares. The real clients themselves run in tests/python/test_clients.py.

use crate::common;

use common::mcp::{binary, Mcp};
use common::TestDir;
use serde_json::json;

async fn tools_have_output_schemas(c: &Mcp) -> Vec<(String, bool)> {
    let tools = common::bounded("tools/list", common::STEP, c.service.list_all_tools())
        .await
        .expect("tools/list failed");
    tools
        .iter()
        .map(|t| (t.name.to_string(), t.output_schema.is_some()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_show_structured_content_get_our_text_alone() {
    let mut t = TestDir::with_daemon().await;
    for name in ["claude-code", "codex-mcp-client", "copilot-cli"] {
        let c = binary(&mut t, name, &[]).await;
        for (tool, schema) in tools_have_output_schemas(&c).await {
            assert!(!schema, "{name}: {tool} declares an output schema");
        }
        let r = c.call("run", json!({ "command": "echo hi" })).await;
        assert!(r.0.structured_content.is_none(), "{name}: {:?}", r.0);
        assert!(
            r.text().starts_with("[id:") && r.text().ends_with("\nhi\n"),
            "{}",
            r.text()
        );
        let r = c.call("run", json!({ "command": "exit 3" })).await;
        assert_eq!(r.0.is_error, Some(true), "{name}: failures stay flagged");
        assert!(r.text().contains(" exit:3 error:EXIT]"), "{}", r.text());
        c.close().await;
    }
    // Any other client keeps both: programs read the typed form.
    let c = binary(&mut t, "some-program", &[]).await;
    assert!(tools_have_output_schemas(&c).await.iter().all(|(_, s)| *s));
    let r = c.call("run", json!({ "command": "echo hi" })).await;
    assert_eq!(r.sc()["output"], "hi\n");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_structured_setting_overrides_the_choice_either_way() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "claude-code", &[("CUBA_EXEC_STRUCTURED", "always")]).await;
    assert!(tools_have_output_schemas(&c).await.iter().all(|(_, s)| *s));
    let r = c.call("run", json!({ "command": "echo hi" })).await;
    assert_eq!(r.sc()["output"], "hi\n");
    c.close().await;

    let c = binary(&mut t, "some-program", &[("CUBA_EXEC_STRUCTURED", "never")]).await;
    assert!(tools_have_output_schemas(&c).await.iter().all(|(_, s)| !*s));
    let r = c.call("run", json!({ "command": "echo hi" })).await;
    assert!(r.0.structured_content.is_none());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_reads_a_failure_as_text_and_its_own_argument_fails_nothing() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "gemini-cli-mcp-client", &[]).await;
    let r = c
        .call(
            "run",
            json!({ "command": "echo oops >&2; exit 3", "wait_for_previous": true }),
        )
        .await;
    // Unflagged: Gemini CLI would hand the model a JSON dump of a flagged result.
    assert_eq!(r.0.is_error, None, "{:?}", r.0);
    assert!(
        r.text().contains(" exit:3 error:EXIT]") && r.text().contains("oops"),
        "{}",
        r.text()
    );
    // A made-up argument is still refused, naming the valid ones.
    let e = c
        .service
        .call_tool(
            rmcp::model::CallToolRequestParams::new("run").with_arguments(
                json!({ "command": "true", "wait_for_prev": true })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await;
    let text = format!("{e:?}");
    assert!(
        text.contains("unknown field `wait_for_prev`") && text.contains("`command`"),
        "{text}"
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_output_bound_is_declared_as_the_result_size_and_used() {
    let mut t = TestDir::with_daemon().await;
    let c = binary(&mut t, "claude-code", &[]).await;
    let tools = common::bounded("tools/list", common::STEP, c.service.list_all_tools())
        .await
        .expect("tools/list failed");
    let declared = |t: &rmcp::model::Tool| {
        t.meta
            .as_ref()
            .is_some_and(|m| m.0.contains_key("anthropic/maxResultSizeChars"))
    };
    assert!(!tools.iter().any(declared), "the default declares nothing");
    // Its search reads hints: every tool has one.
    assert!(
        tools.iter().all(|t| t
            .meta
            .as_ref()
            .is_some_and(|m| m.0.contains_key("anthropic/searchHint"))),
        "{tools:?}"
    );
    // The default bound holds a long output to a few kilobytes, head and tail.
    let r = c.call("run", json!({ "command": "seq 1 200000" })).await;
    assert!(r.text().len() < 9_000, "{} chars", r.text().len());
    assert!(r.text().contains("bytes truncated ...]\n") && r.text().ends_with("\n200000\n"));
    c.close().await;

    let c = binary(&mut t, "claude-code", &[("CUBA_EXEC_MAX_OUTPUT", "100K")]).await;
    let tools = common::bounded("tools/list", common::STEP, c.service.list_all_tools())
        .await
        .expect("tools/list failed");
    for tool in &tools {
        let size = tool
            .meta
            .as_ref()
            .and_then(|m| m.0.get("anthropic/maxResultSizeChars"))
            .and_then(|v| v.as_u64());
        assert_eq!(size, Some(100 * 1024 + 2048), "{}", tool.name);
    }
    let r = c.call("run", json!({ "command": "seq 1 200000" })).await;
    // 100 KiB bound 6400 lines: 1600 at the head, 4800 at the tail.
    let len = r.text().len();
    assert!((30_000..=100 * 1024 + 2048).contains(&len), "{len} chars");
    assert_eq!(
        r.text().lines().count(),
        1 + 1600 + 1 + 4800,
        "header, head, marker, tail"
    );
    c.close().await;
}
