//! Feeds arbitrary bytes (as lossy UTF-8) to the condition parser, `parse_condition`.
//!
//! Beyond "no panic, no stack overflow": whatever parses must print (the AST's canonical
//! `Display`) to text that parses again and prints identically. What parses is also compiled
//! against the test catalog and, when it compiles, evaluated (and, as an output template of
//! its first operand's text, rendered) on a fixed event, so the evaluator's operators and
//! transformers (`join`, `concat`, `getopt` …) see fuzzed arguments too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil_rules::compile::Compiler;
use vigil_rules::eval::EvalCtx;
use vigil_rules::parser::parse_condition;
use vigil_rules::testcatalog::{TestCatalog, TestEvent};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(expr) = parse_condition(&text) {
        let printed = expr.to_string();
        let again = parse_condition(&printed)
            .unwrap_or_else(|e| panic!("canonical form {printed:?} does not parse: {e}"));
        assert_eq!(again.to_string(), printed, "printing is not stable");

        let catalog = TestCatalog::new();
        let mut compiler = Compiler::new(&catalog);
        if let Ok(filter) = compiler.compile(&expr) {
            let template = compiler.compile_template(&format!("%{printed}")).ok();
            let mut event = TestEvent::new("execve");
            event
                .set("proc.name", "bash")
                .set("proc.pname", "sshd")
                .set("proc.cmdline", "bash -c ls")
                .set("fd.name", "/etc/passwd")
                .set("evt.arg.flags", "O_RDONLY");
            let mut ctx = EvalCtx::new(&compiler.finish());
            let mut ectx = ctx.event();
            let _ = filter.eval(&event, &mut ectx);
            if let Some(t) = template {
                let _ = t.render(&event, &mut ectx);
            }
        }
    }
});
