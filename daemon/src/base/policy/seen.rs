//! What a walk of a shell text finds: its simple commands.

/// One simple command found in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The normalised program name; `None` when it is only known at run time.
    pub name: Option<String>,
    /// The command as written (its words joined by spaces).
    pub text: String,
    /// Why it is unresolved (set when `name` is `None`, and for `eval` / `source`).
    pub unresolved: Option<&'static str>,
    /// Its arguments' values, each `None` where only run time knows it (for `ask` patterns).
    pub args: Vec<Option<String>>,
}

impl Seen {
    /// How the command is shown in a decision: `rm -rf /`, or `?(…)` when unresolved.
    pub fn display(&self) -> String {
        match self.unresolved {
            Some(_) => format!("?({})", self.text),
            None => self.text.clone(),
        }
    }
}

/// What a walk found in a text: its simple commands and the texts it followed, or the
/// parser's error.
pub type Collected = Result<(Vec<Seen>, Vec<String>), String>;
