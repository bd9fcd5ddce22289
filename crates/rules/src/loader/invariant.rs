//! Static truth of a condition under the runtime invariants of fields, used only to decide
//! Falco's `LOAD_NO_EVTTYPE` warning (`W_NO_EVTTYPE`). Evaluation never relies on it.
//!
//! As libsinsp's `filter/ppm_codes.cpp` (`evaluate_field_invariant`), the one field with a
//! known invariant is a bare `evt.num`: event numbers start at 1, so `evt.num = 0`,
//! `evt.num < 1`, `evt.num <= 0` and `evt.num in (0, …)` can never hold, and their negations
//! always do. A rule whose whole condition can never hold (Falco's `never_true` placeholder
//! idiom, `condition: (evt.num=0)`) matches no event type at all, so Falco does not warn that it
//! matches too many (falco `test_rule_loader.cpp`: `no_evttype_warning_for_never_true_macro`,
//! `no_evttype_warning_for_unsatisfiable_condition`).

use crate::ast::{CmpOp, Expr, Rhs};

/// What is known of a condition before any event: always false, always true, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    False,
    True,
    Unknown,
}

impl Truth {
    fn not(self) -> Truth {
        match self {
            Truth::False => Truth::True,
            Truth::True => Truth::False,
            Truth::Unknown => Truth::Unknown,
        }
    }
}

/// The static truth of an expanded condition (macros already replaced). Recursion is bounded
/// by the loader's depth limit on expanded conditions.
pub fn truth(expr: &Expr) -> Truth {
    match expr {
        Expr::Const(true) => Truth::True,
        Expr::Const(false) => Truth::False,
        Expr::Not(e) => truth(e).not(),
        Expr::And(items) => {
            let mut out = Truth::True;
            for t in items.iter().map(truth) {
                match t {
                    Truth::False => return Truth::False,
                    Truth::Unknown => out = Truth::Unknown,
                    Truth::True => {}
                }
            }
            out
        }
        Expr::Or(items) => {
            let mut out = Truth::False;
            for t in items.iter().map(truth) {
                match t {
                    Truth::True => return Truth::True,
                    Truth::Unknown => out = Truth::Unknown,
                    Truth::False => {}
                }
            }
            out
        }
        Expr::Compare { lhs, op, rhs, .. } => {
            let bare_evt_num = lhs.transformers.is_empty()
                && lhs.call.is_none()
                && lhs.field.arg.is_none()
                && lhs.field.name == "evt.num";
            if bare_evt_num {
                evt_num(*op, rhs)
            } else {
                Truth::Unknown
            }
        }
        Expr::Macro { .. } | Expr::Exists { .. } => Truth::Unknown,
    }
}

/// `evt.num OP rhs`, given that `evt.num >= 1`.
fn evt_num(op: CmpOp, rhs: &Rhs) -> Truth {
    match rhs {
        Rhs::List(items) if op == CmpOp::In => {
            if items.iter().all(|l| parse_u64(&l.text) == Some(0)) {
                Truth::False
            } else {
                Truth::Unknown
            }
        }
        Rhs::Value(lit) => {
            let Some(n) = parse_u64(&lit.text) else {
                return Truth::Unknown;
            };
            match op {
                CmpOp::Eq if n == 0 => Truth::False,
                CmpOp::Ne if n == 0 => Truth::True,
                CmpOp::Lt if n <= 1 => Truth::False,
                CmpOp::Le if n == 0 => Truth::False,
                CmpOp::Gt if n == 0 => Truth::True,
                CmpOp::Ge if n <= 1 => Truth::True,
                _ => Truth::Unknown,
            }
        }
        _ => Truth::Unknown,
    }
}

/// A decimal or `0x` hexadecimal unsigned literal.
fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_condition;

    fn t(src: &str) -> Truth {
        truth(&parse_condition(src).unwrap())
    }

    #[test]
    fn evt_num_invariants() {
        for never in [
            "evt.num = 0",
            "evt.num < 1",
            "evt.num <= 0",
            "evt.num in (0)",
            "evt.num in (0, 0x0)",
            "(evt.num=0)",
            "proc.name = cat and evt.num = 0",
            "not evt.num != 0",
            "not (evt.num > 0 or proc.name = cat) and proc.name = x",
        ] {
            assert_eq!(t(never), Truth::False, "{never}");
        }
        for always in [
            "evt.num != 0",
            "evt.num > 0",
            "evt.num >= 1",
            "not evt.num = 0",
        ] {
            assert_eq!(t(always), Truth::True, "{always}");
        }
        for unknown in [
            "evt.num = 1",
            "evt.num < 2",
            "evt.num in (0, 1)",
            "evt.num = -1",
            "evt.num = x",
            "proc.name = cat or evt.num = 0",
            "tolower(evt.num) = 0",
            "evt.type = open",
            "some_macro",
        ] {
            assert_eq!(t(unknown), Truth::Unknown, "{unknown}");
        }
    }
}
