#include "report/plan_costs.h"

#include <nlohmann/json.hpp>

#include "runtime/plan_convert.h"

namespace pcc {

std::string planCostsJson(const plan::Plan& p) {
  using Json = nlohmann::ordered_json;
  Json doc;
  doc["device"] = p.search().device();
  Json ranks = Json::array();
  for (const plan::RankProgram& prog : p.ranks()) {
    Json list = Json::array();
    double total = 0;
    for (int i = 0; i < prog.instructions_size(); ++i) {
      const plan::Instruction& ins = prog.instructions(i);
      total += ins.estimated_seconds();
      list.push_back(Json{{"index", i},
                          {"kind", instructionKindName(ins.kind())},
                          {"op", ins.op()},
                          {"node", ins.node()},
                          {"estimated_seconds", ins.estimated_seconds()}});
    }
    ranks.push_back(Json{{"rank", prog.rank()}, {"estimated_seconds", total}, {"instructions", std::move(list)}});
  }
  doc["ranks"] = std::move(ranks);
  return doc.dump(1) + "\n";
}

}  // namespace pcc
