mod conformance;
mod lifecycle_model;
