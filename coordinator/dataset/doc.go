// Package dataset writes the dataset of observations (docs/dataset.md) as
// Apache Parquet: the row schema (ParquetRow, SchemaVersion) and the
// streaming writer (ParquetWriter) that both the API's export
// (coordinator/api, format=parquet) and the periodic export into the
// bucket (coordinator, "Exports in the bucket") use, so that a file of
// either has the same columns and types.
package dataset
