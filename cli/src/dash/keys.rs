//! What each key does to the dashboard's [`View`]: pages, the selected row, opening and closing
//! a detail and scrolling it, the key help. A pure function of the view, the key and how many
//! rows the page has, so it is tested without a terminal.

use super::view::{Page, View};
use ratatui::crossterm::event::KeyCode;

/// What the screen does after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// Draw the view as it now is.
    Draw,
    /// Ask the reader for a fresh reading.
    ReadNow,
    /// Leave the dashboard.
    Quit,
}

/// Applies `key` to `view`, on a page of `rows` rows with `visible` of them on the screen.
pub fn press(view: &mut View, key: KeyCode, rows: usize, visible: u16) -> Then {
    let last = rows.saturating_sub(1);
    let page_rows = usize::from(visible.max(1));
    // A list that shrank since the last key leaves no selection past its end.
    view.selected = view.selected.min(last);
    if view.help {
        // Any key closes the help; q still quits.
        view.help = false;
        return if key == KeyCode::Char('q') { Then::Quit } else { Then::Draw };
    }
    match key {
        KeyCode::Char('q') => return Then::Quit,
        KeyCode::Char('?') => view.help = true,
        KeyCode::Char('r') => return Then::ReadNow,
        KeyCode::Esc | KeyCode::Backspace if view.open => {
            view.open = false;
            view.scroll = 0;
        }
        KeyCode::Esc => return Then::Quit,
        KeyCode::Enter if view.open => {
            view.open = false;
            view.scroll = 0;
        }
        KeyCode::Enter if rows > 0 && view.page != Page::Approvals => view.open = true,
        KeyCode::Up | KeyCode::Char('k') if view.open => {
            view.scroll = view.scroll.saturating_sub(1)
        }
        KeyCode::Down | KeyCode::Char('j') if view.open => {
            view.scroll = view.scroll.saturating_add(1)
        }
        KeyCode::PageUp if view.open => view.scroll = view.scroll.saturating_sub(visible),
        KeyCode::PageDown if view.open => view.scroll = view.scroll.saturating_add(visible),
        KeyCode::Home if view.open => view.scroll = 0,
        KeyCode::End if view.open => {}
        KeyCode::Up | KeyCode::Char('k') => {
            view.selected = view.selected.min(last).saturating_sub(1)
        }
        KeyCode::Down | KeyCode::Char('j') => view.selected = (view.selected + 1).min(last),
        KeyCode::PageUp => view.selected = view.selected.min(last).saturating_sub(page_rows),
        KeyCode::PageDown => view.selected = (view.selected + page_rows).min(last),
        KeyCode::Home => view.selected = 0,
        KeyCode::End => view.selected = last,
        KeyCode::Tab | KeyCode::Right => switch(view, view.page.next()),
        KeyCode::BackTab | KeyCode::Left => switch(view, view.page.previous()),
        KeyCode::Char(c) => {
            if let Some(page) = Page::from_key(c) {
                switch(view, page);
            }
        }
        _ => {}
    }
    Then::Draw
}

/// Another page: its first row, nothing open.
fn switch(view: &mut View, page: Page) {
    if page != view.page {
        *view = View { help: view.help, ..View::new(page) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_selected_within_the_list_and_enter_opens_and_closes() {
        let mut v = View::new(Page::Work);
        assert_eq!(press(&mut v, KeyCode::Up, 3, 10), Then::Draw);
        assert_eq!(v.selected, 0, "not above the first");
        press(&mut v, KeyCode::Down, 3, 10);
        press(&mut v, KeyCode::Char('j'), 3, 10);
        press(&mut v, KeyCode::Down, 3, 10);
        assert_eq!(v.selected, 2, "not below the last");
        press(&mut v, KeyCode::Enter, 3, 10);
        assert!(v.open);
        press(&mut v, KeyCode::Down, 3, 10);
        press(&mut v, KeyCode::PageDown, 3, 10);
        assert_eq!((v.selected, v.scroll), (2, 11), "in a detail, keys scroll it");
        press(&mut v, KeyCode::Esc, 3, 10);
        assert!(!v.open && v.scroll == 0, "Esc goes back, it does not quit");
        assert_eq!(press(&mut v, KeyCode::Esc, 3, 10), Then::Quit, "from a list it quits");
    }

    #[test]
    fn pages_switch_to_their_first_row_and_help_closes_on_any_key() {
        let mut v = View::new(Page::Goals);
        press(&mut v, KeyCode::End, 50, 10);
        assert_eq!(v.selected, 49);
        press(&mut v, KeyCode::PageUp, 50, 10);
        assert_eq!(v.selected, 39);
        press(&mut v, KeyCode::Char('4'), 50, 10);
        assert_eq!((v.page, v.selected), (Page::Approvals, 0));
        press(&mut v, KeyCode::Enter, 2, 10);
        assert!(!v.open, "approvals have no detail");
        press(&mut v, KeyCode::Char('?'), 2, 10);
        assert!(v.help);
        assert_eq!(press(&mut v, KeyCode::Char('2'), 2, 10), Then::Draw);
        assert_eq!((v.help, v.page), (false, Page::Approvals), "the key only closed the help");
        press(&mut v, KeyCode::Enter, 0, 10);
        assert!(!v.open);
        assert_eq!(press(&mut v, KeyCode::Char('r'), 0, 10), Then::ReadNow);
        let mut empty = View::new(Page::Work);
        press(&mut empty, KeyCode::Enter, 0, 10);
        assert!(!empty.open, "nothing to open");
    }
}
