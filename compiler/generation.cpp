#include "compiler/generation.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <regex>

#include <nlohmann/json.hpp>
#include <onnx/onnx-ml.pb.h>

namespace pcc {

namespace {

/// Layer and key (0) / value (1) of a cache name with stem `stem`
/// ("past_key_values", "past", "present", "present_key_values").
std::optional<std::pair<int, int>> cacheSlot(const std::string& name, const std::vector<std::string>& stems) {
  for (const std::string& stem : stems) {
    static const std::regex re(R"(^([A-Za-z_]+)[._](\d{1,6})[._](key|value)$)");
    std::smatch m;
    if (!std::regex_match(name, m, re) || m[1].str() != stem) continue;
    return std::make_pair(std::stoi(m[2].str()), m[3].str() == "key" ? 0 : 1);
  }
  return std::nullopt;
}

std::vector<int64_t> dimsOf(const onnx::ValueInfoProto& v, std::vector<std::string>* symbols = nullptr) {
  std::vector<int64_t> d;
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return d;
  for (const auto& dim : v.type().tensor_type().shape().dim()) {
    d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    if (symbols) symbols->push_back(dim.has_dim_param() ? dim.dim_param() : "");
  }
  return d;
}

/// Reads the context length and end-of-sequence ids from a config next to the model.
void readConfig(const std::string& path, GenerationInterface& gi) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  const std::string stem = fs::path(path).stem().string();
  for (const fs::path& f : {dir / (stem + ".config.json"), dir / "genai_config.json", dir / "config.json"}) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec) || fs::file_size(f, ec) > (1 << 20)) continue;
    std::ifstream in(f);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;
    const nlohmann::json* model = j.contains("model") && j["model"].is_object() ? &j["model"] : &j;
    for (const char* key : {"max_position_embeddings", "n_positions", "context_length"}) {
      if (model->contains(key) && (*model)[key].is_number_integer() && (*model)[key].get<int64_t>() > 1) {
        gi.maxPositions = (*model)[key].get<int64_t>();
        gi.maxPositionsSource = strCat(f.filename().string(), " ", key);
        break;
      }
    }
    const nlohmann::json* decoder = model->contains("decoder") && (*model)["decoder"].is_object() ? &(*model)["decoder"] : model;
    for (const char* key : {"head_size", "head_dim"})
      if (gi.configHeadDim == 0 && decoder->contains(key) && (*decoder)[key].is_number_integer() &&
          (*decoder)[key].get<int64_t>() > 0)
        gi.configHeadDim = (*decoder)[key].get<int64_t>();
    if (model->contains("eos_token_id")) {
      const nlohmann::json& e = (*model)["eos_token_id"];
      if (e.is_number_integer()) gi.eosTokenIds = {e.get<int64_t>()};
      if (e.is_array())
        for (const auto& x : e)
          if (x.is_number_integer()) gi.eosTokenIds.push_back(x.get<int64_t>());
    }
    if (gi.maxPositions > 0) return;
  }
}

}  // namespace

StatusOr<std::optional<GenerationInterface>> findGenerationInterface(const onnx::ModelProto& m,
                                                                     const std::string& path) {
  const onnx::GraphProto& g = m.graph();
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::map<std::pair<int, int>, const onnx::ValueInfoProto*> past, present;
  GenerationInterface gi;
  const onnx::ValueInfoProto* ids = nullptr;
  for (const auto& in : g.input()) {
    if (initializers.count(in.name())) continue;
    if (auto s = cacheSlot(in.name(), {"past_key_values", "past"})) past[*s] = &in;
    if (in.name() == "input_ids") ids = &in;
    if (in.name() == "attention_mask") gi.attentionMask = in.name();
    if (in.name() == "position_ids") gi.positionIds = in.name();
  }
  for (const auto& out : g.output())
    if (auto s = cacheSlot(out.name(), {"present", "present_key_values"})) present[*s] = &out;
  if (past.empty() && present.empty()) return std::optional<GenerationInterface>();
  for (const auto& [slot, v] : past)
    if (!present.count(slot))
      return invalidInput(path, ": KV cache input '", v->name(), "' has no present output for layer ", slot.first,
                          " (expected present.", slot.first, slot.second ? ".value" : ".key", ")");
  for (const auto& [slot, v] : present)
    if (!past.count(slot))
      return invalidInput(path, ": KV cache output '", v->name(), "' has no past input for layer ", slot.first);
  if (!ids) return invalidInput(path, ": a decoder with a KV cache needs an 'input_ids' input for generation");
  gi.inputIds = ids->name();
  if (gi.attentionMask.empty())
    return invalidInput(path, ": a decoder with a KV cache needs an 'attention_mask' input: pcc hides the cache "
                        "positions not written yet with it");
  for (const auto& out : g.output())
    if (out.name() == "logits") gi.logits = out.name();
  if (gi.logits.empty()) return invalidInput(path, ": a decoder with a KV cache needs a 'logits' output");
  readConfig(path, gi);
  for (const auto& [slot, v] : past) {
    gi.pairs.push_back({v->name(), present[slot]->name()});
    std::vector<int64_t> d = dimsOf(*v);
    // onnxruntime-genai's builder leaves the head size symbolic
    // ('kv_cache_dim'); its genai_config.json says it.
    if (d.size() == 4 && d[3] < 1 && gi.configHeadDim > 0) d[3] = gi.configHeadDim;
    if (d.size() != 4 || d[1] < 1 || d[3] < 1) {
      std::string shape;
      for (const auto& dim : v->type().tensor_type().shape().dim())
        shape += strCat(shape.empty() ? "" : ",", dim.has_dim_value() ? std::to_string(dim.dim_value())
                                                  : dim.dim_param().empty() ? std::string("?") : dim.dim_param());
      return invalidInput(path, ": cache layout not recognized: input '", v->name(), "' [", shape,
                          "] must be 4-D [batch, kv heads, positions, head dim] with static heads and head dim "
                          "(--no-generation compiles a plain forward pass)");
    }
    if (gi.kvHeads == 0) {
      gi.kvHeads = d[1];
      gi.headDim = d[3];
    }
  }
  for (const auto& out : g.output())
    if (out.name() == gi.logits) {
      std::vector<int64_t> d = dimsOf(out);
      if (!d.empty() && d.back() > 0) gi.vocab = d.back();
    }
  return std::optional<GenerationInterface>(std::move(gi));
}

void bindDecodeShapes(const GenerationInterface& gi, int64_t batch, int64_t maxContext, ImportOptions& io) {
  auto bind = [&](const std::string& name, Dims d) {
    if (!name.empty() && !io.shapes.count(name)) io.shapes[name] = std::move(d);
  };
  bind(gi.inputIds, {batch, 1});
  bind(gi.positionIds, {batch, 1});
  bind(gi.attentionMask, {batch, maxContext});
  for (const KvCachePair& p : gi.pairs) bind(p.past, {batch, gi.kvHeads, maxContext - 1, gi.headDim});
}

void bindPrefillShapes(const GenerationInterface& gi, int64_t batch, int64_t maxContext, int64_t maxPrompt,
                       bool placeholderPast, ImportOptions& io) {
  const int64_t past = placeholderPast ? 1 : maxContext - maxPrompt;
  io.shapes[gi.inputIds] = {batch, maxPrompt};
  if (!gi.positionIds.empty()) io.shapes[gi.positionIds] = {batch, maxPrompt};
  io.shapes[gi.attentionMask] = {batch, placeholderPast ? maxPrompt + 1 : maxContext};
  for (const KvCachePair& p : gi.pairs) io.shapes[p.past] = {batch, gi.kvHeads, past, gi.headDim};
}

}  // namespace pcc
