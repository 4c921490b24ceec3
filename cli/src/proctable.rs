//! The process table as people see it (`ps`) and as scripts read it (`--json`).

use std::collections::HashMap;

use cuba_protocol::hosts::LOCAL;
use cuba_protocol::{BudgetUse, ProcessInfo};

use crate::ctx::Ctx;
use crate::describe;
use crate::json::{memory, ProcessJson};
use crate::style::{self, Paint};
use crate::table::{Cell, Column, Table};
use crate::units;
use crate::usage::{self, Usage};

/// One process of a table, with the host it runs on (shown when `HOST` is) and its usage.
pub type Entry<'a> = (Option<&'a str>, &'a ProcessInfo, Option<&'a Usage>);

/// `list` as `--json` rows, each with what cubactl measured of it.
pub fn json_rows<'a>(
    host: Option<&'a str>,
    list: &'a [ProcessInfo],
    usage: &'a HashMap<u64, Usage>,
) -> Vec<ProcessJson<'a>> {
    list.iter()
        .map(|p| ProcessJson::of(p).on(host).with(usage.get(&p.id)))
        .collect()
}

pub fn render(
    ctx: &Ctx,
    list: &[ProcessInfo],
    usage: &HashMap<u64, Usage>,
    budgets: &[BudgetUse],
) -> String {
    let entries: Vec<Entry> = list.iter().map(|p| (None, p, usage.get(&p.id))).collect();
    let mut text = render_entries(ctx, &entries, false);
    // What the daemon says of a running one (its client has gone and it will be stopped, or
    // a person is asked; its agent's budget was reached): under the table, by id.
    for p in list.iter().filter(|p| !p.state.is_finished()) {
        for notice in [&p.notice, &p.budget_hit].into_iter().flatten() {
            text.push_str(&format!("{:>4}  {notice}\n", p.id));
        }
    }
    if !budgets.is_empty() {
        text.push_str("budgets (use now/budget):\n");
        for b in budgets {
            text.push_str(&format!("  {}\n", b.line()));
        }
    }
    text
}

/// The table of `entries`, with a `HOST` column first when `hosts`.
pub fn render_entries(ctx: &Ctx, entries: &[Entry], hosts: bool) -> String {
    // KIND only when some row is not a plain command on pipes: the usual table stays narrow.
    let kinds = entries
        .iter()
        .any(|(_, p, _)| describe::kind_cell(p).is_some());
    let mut columns = Vec::new();
    if hosts {
        columns.push(Column::left("HOST"));
    }
    columns.extend([Column::right("ID"), Column::left("NAME").optional(4)]);
    if kinds {
        columns.push(Column::left("KIND").optional(4));
    }
    columns.extend([
        Column::left("OWNER").optional(5),
        Column::left("STATE"),
        Column::right("EXIT"),
        Column::right("AGE").optional(3),
        Column::right("TIME").optional(3),
        Column::right("CPU%").optional(1),
        Column::right("RSS").optional(2),
        Column::right("CPU").optional(3),
        Column::right("MEM").optional(3),
        Column::left("PORTS").optional(6),
        Column::left("COMMAND").flex(),
    ]);
    let mut t = Table::new(columns);
    let now = cuba_protocol::now_ms();
    for &(host, p, u) in entries {
        let dim = p.state.is_finished().then_some(Paint::Dim);
        let exit_paint = match (p.exit_code, p.signal) {
            (Some(0), None) => None,
            (None, None) => dim,
            _ => Some(Paint::Red),
        };
        let mut row = Vec::new();
        if hosts {
            row.push(Cell::new(host.unwrap_or(LOCAL)));
        }
        row.extend([
            Cell::painted(p.id.to_string(), Some(Paint::Bold)),
            Cell::painted(p.name.as_deref().unwrap_or("-"), Some(Paint::Cyan)),
        ]);
        if kinds {
            row.push(Cell::new(
                describe::kind_cell(p).unwrap_or_else(|| "-".to_string()),
            ));
        }
        row.extend([
            Cell::new(&p.owner.name),
            Cell::painted(p.state.as_str(), style::of_state(p)),
            Cell::painted(describe::exit_cell(p), exit_paint),
            // Since it started; TIME: how long it ran (so far).
            Cell::painted(units::age(now.saturating_sub(p.started_at_ms)), dim),
            Cell::painted(units::age(p.elapsed_ms(now)), dim),
            Cell::new(
                u.and_then(|u| u.cpu_percent)
                    .map_or("-".to_string(), |c| format!("{c:.1}")),
            ),
            Cell::new(u.map_or("-".to_string(), |u| units::bytes(u.rss_bytes))),
            Cell::new(p.cpu_ms.map_or("-".to_string(), units::age)),
            Cell::new(memory(p).map_or("-".to_string(), units::bytes)),
            Cell::new(usage::ports_cell(p, u)),
            Cell::painted(&p.command, dim),
        ]);
        t.push(row);
    }
    t.render(ctx.out, ctx.width)
}
