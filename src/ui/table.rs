//! A plain column-aligned table whose widths ignore colour codes, so a
//! coloured table lines up exactly like the plain one.

use console::measure_text_width;

#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(measure_text_width(cell));
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if i + 1 < row.len() {
                    let pad = widths[i] - measure_text_width(cell) + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns_ignoring_colour_codes() {
        let mut t = Table::new(&["NODE", "STATE"]);
        t.row(vec!["cp-1".into(), "\u{1b}[31mdown\u{1b}[0m".into()]);
        t.row(vec!["worker-10".into(), "up".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NODE       STATE");
        assert_eq!(lines[1], "cp-1       \u{1b}[31mdown\u{1b}[0m");
        assert_eq!(lines[2], "worker-10  up");
    }

    #[test]
    fn a_styled_remote_value_cannot_carry_our_colours() {
        let cell = crate::ui::bad("\u{1b}[32mfine\u{1b}[0m");
        let escaped = crate::ui::escape::escape_controls_keeping_colours(&cell);
        assert!(escaped.contains("\\033[32mfine\\033[0m"), "{escaped:?}");
    }
}
