// Package config loads and checks the YAML configuration of the edgeagent
// daemon ([Agent]) and of the edgecoord coordinator ([Coordinator]).
//
// Loading runs one pipeline:
//
//  1. start from the documented defaults ([DefaultAgent], [DefaultCoordinator]);
//  2. read the file;
//  3. decode it strictly: every key must name a field, and every value must
//     have the field's type (an unknown key, a mapping where a string belongs,
//     a malformed duration or size are problems with file:line:col);
//  4. expand ${NAME} references to environment variables inside string values
//     ($$ stands for a literal $), so secrets can stay out of the file;
//  5. resolve relative *_file and TLS file paths against the directory of the
//     config file;
//  6. run Validate, which checks every rule and reports every violation with
//     its field path (for example "nats.url: required");
//  7. read the secrets named by password_file, token_file and secret_key_file.
//
// Decoding does not stop at the first problem: an unknown key, a missing
// required field and a malformed duration in one file are all reported in one
// run, as a [Problems] error with one [Problem] per line.
//
// Secret values are held in the [Secret] type, which prints, logs and
// marshals as "***"; call [Secret.Value] where the secret is actually used.
// Messages never contain a secret value.
package config
