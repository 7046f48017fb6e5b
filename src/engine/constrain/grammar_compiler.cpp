// Constraint dispatch to the front ends, and the LRU cache of compiled grammars.
#include "engine/constrain/grammar_compiler.h"

#include "core/error.h"
#include "engine/constrain/automaton.h"
#include "engine/constrain/ebnf.h"
#include "engine/constrain/json_schema.h"
#include "engine/constrain/regex.h"
#include "engine/constrain/tool_call_grammar.h"

namespace vela {

const char* constraint_kind_name(Constraint::Kind k) {
  switch (k) {
    case Constraint::Kind::kNone:
      return "none";
    case Constraint::Kind::kJsonSchema:
      return "json_schema";
    case Constraint::Kind::kJsonObject:
      return "json_object";
    case Constraint::Kind::kRegex:
      return "regex";
    case Constraint::Kind::kGrammar:
      return "grammar";
    case Constraint::Kind::kChoice:
      return "choice";
    case Constraint::Kind::kToolCalls:
      return "tool_calls";
  }
  return "none";
}

namespace constrain {

Grammar build_grammar(const Constraint& c) {
  switch (c.kind) {
    case Constraint::Kind::kJsonSchema: {
      json schema;
      try {
        schema = json::parse(c.text);
      } catch (const std::exception& e) {
        VELA_THROW(InvalidArgument, "json_schema: not valid JSON: ", e.what());
      }
      return json_schema_grammar(schema);
    }
    case Constraint::Kind::kJsonObject:
      return json_object_grammar();
    case Constraint::Kind::kRegex:
      return regex_grammar(c.text);
    case Constraint::Kind::kGrammar:
      return parse_ebnf(c.text);
    case Constraint::Kind::kChoice: {
      json list;
      try {
        list = json::parse(c.text);
      } catch (const std::exception& e) {
        VELA_THROW(InvalidArgument, "guided_choice: not valid JSON: ", e.what());
      }
      VELA_CHECK(list.is_array() && !list.empty(),
                 "guided_choice must be a non-empty list of strings");
      std::vector<std::string> choices;
      for (const json& s : list) {
        VELA_CHECK(s.is_string(), "guided_choice entries must be strings, got ", s.dump());
        choices.push_back(s.get<std::string>());
      }
      return choice_grammar(choices);
    }
    case Constraint::Kind::kToolCalls: {
      json spec;
      try {
        spec = json::parse(c.text);
      } catch (const std::exception& e) {
        VELA_THROW(InvalidArgument, "tool_calls constraint: not valid JSON: ", e.what());
      }
      return tool_call_grammar(spec);
    }
    case Constraint::Kind::kNone:
      break;
  }
  VELA_THROW(InvalidArgument, "no constraint to compile");
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_entries)
    : vocab_(std::move(vocab)), max_entries_(std::max<size_t>(1, max_entries)) {}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const Constraint& c) {
  const std::string key = std::string(constraint_kind_name(c.kind)) + '\0' + c.text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  auto compiled =
      std::make_shared<const CompiledGrammar>(compile_automaton(build_grammar(c)), vocab_);
  std::lock_guard<std::mutex> lock(mu_);
  ++n_compiles_;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.first;
  lru_.push_front(key);
  cache_.emplace(key, std::make_pair(compiled, lru_.begin()));
  while (cache_.size() > max_entries_) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCompiler::n_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

int64_t GrammarCompiler::n_compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_compiles_;
}

}  // namespace constrain
}  // namespace vela
