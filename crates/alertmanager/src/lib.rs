//! Alertmanager push client of assertwatch (work in progress).
