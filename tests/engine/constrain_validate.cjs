// Oracle for the constrained-decoding suite (test_constrain_suite.cpp): every sampled output must
// parse as JSON and validate against its schema with ajv (draft 2020-12), every regex output must
// fully match the pattern as a JavaScript RegExp, every grammar output its independent check.
//   node constrain_validate.cjs OUTPUTS.json      (NODE_PATH = <assets>/node_modules)
// Prints one line per case; exits 1 when anything is invalid (the first failures are printed).
"use strict";
const fs = require("fs");
const Ajv2020 = require("ajv/dist/2020").default;

const ajv = new Ajv2020({ strict: false, allErrors: false });
// Formats vela's grammars produce (ajv-formats is not installed): strict regexes plus range checks.
ajv.addFormat("date", /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/);
ajv.addFormat("time", /^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/);
ajv.addFormat("date-time", /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/);
ajv.addFormat("uuid", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
ajv.addFormat("email", /^[a-zA-Z0-9._%+\-]+@[a-zA-Z0-9\-]+(\.[a-zA-Z0-9\-]+)+$/);

const data = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
let bad = 0, total = 0;
const failures = [];
function report(name, outputs, check) {
  let ok = 0;
  for (const out of outputs) {
    total++;
    let err = null;
    try {
      err = check(out);
    } catch (e) {
      err = String(e.message || e);
    }
    if (err === null) ok++;
    else {
      bad++;
      if (failures.length < 10) failures.push(`${name}: ${err}\n    output: ${JSON.stringify(out)}`);
    }
  }
  console.log(`${ok === outputs.length ? "ok  " : "FAIL"} ${name}: ${ok}/${outputs.length}`);
}

function arithmetic(s) {  // expr ::= term (("+"|"-") term){0,3}; term ::= [0-9]{1,3} | "(" expr ")"
  const flat = /^[0-9]{1,3}([+-][0-9]{1,3}){0,3}$/;
  let prev = null;
  while (s !== prev) {
    prev = s;
    s = s.replace(/\(([^()]*)\)/, (m, inner) => {
      if (!flat.test(inner)) throw new Error(`bad group (${inner})`);
      return "0";
    });
  }
  return flat.test(s) ? null : "not an expression";
}

for (const c of data.schemas) {
  const validate = ajv.compile(c.schema);
  report(`schema ${c.name}`, c.outputs, (out) => {
    const v = JSON.parse(out);
    return validate(v) ? null : ajv.errorsText(validate.errors);
  });
}
for (const c of data.regex) {
  const re = new RegExp(`^(?:${c.pattern})$`, "u");
  report(`regex /${c.pattern}/`, c.outputs, (out) => (re.test(out) ? null : "no match"));
}
for (const c of data.grammar) {
  const g = c.case;
  let check;
  if (g.regex) {
    const re = new RegExp(`^(?:${g.regex})$`, "u");
    check = (out) => (re.test(out) ? null : "no match");
  } else if (g.schema) {
    const validate = ajv.compile(g.schema);
    check = (out) => (validate(JSON.parse(out)) ? null : ajv.errorsText(validate.errors));
  } else if (g.oracle === "arithmetic") {
    check = arithmetic;
  } else {
    throw new Error("grammar case without an oracle");
  }
  report(`grammar ${JSON.stringify(g.gbnf.split("\n")[0])}`, c.outputs, check);
}
for (const f of failures) console.log(f);
console.log(`${total - bad}/${total} outputs valid`);
process.exit(bad === 0 ? 0 : 1);
