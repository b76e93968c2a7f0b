//! The cover on synthetic process tables.
