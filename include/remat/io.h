// io.h — files in and out (formats documented field by field in docs/formats.md).
// remat-graph JSON v1, plan JSON, chain and chain plan JSON, and importers for the Checkmate /
// MOCCASIN NetworkX node-link files. Every reader throws InputError naming the file and the line
// (for syntax) or the id (for content); writers go through a temporary file renamed at the end, so
// a failure never leaves a partial output file.
//   Graph g = read_graph_file("model.json");        // remat-graph, or NetworkX (auto-detected)
//   write_plan_file("plan.json", g, result, budget);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "remat/chain.h"
#include "remat/files.h"
#include "remat/graph.h"
#include "remat/plan.h"
#include "remat/simulate.h"
#include "remat/solver.h"

namespace remat {

enum class FileKind { kGraph, kNetworkx, kChain, kPlan };
// Detects the kind of a JSON document (the "format" field, or NetworkX's "nodes"/"links").
FileKind detect_file_kind(std::string_view json_text, std::string_view source);

// remat-graph JSON v1. A graph none of whose nodes makes a graph output is refused (nothing to
// plan): require_outputs(), which every reader and Python's Graph.build apply.
Graph parse_graph_json(std::string_view json_text, std::string_view source);
void require_outputs(const Graph& graph, std::string_view source);
std::string graph_to_json(const Graph& graph);
// Any graph file: remat-graph or NetworkX (converted on the fly).
Graph read_graph_file(const std::string& path);
// A graph file (remat-graph or NetworkX) or a chain file, told apart and parsed in one pass.
std::variant<Graph, Chain> parse_graph_or_chain(std::string_view json_text,
                                                std::string_view source);
void write_graph_file(const std::string& path, const Graph& graph);

// NetworkX node-link JSON of the MOCCASIN (RL) and Checkmate (CM) data sets.
Graph import_networkx_json(std::string_view json_text, std::string_view source);

// Chain JSON.
Chain parse_chain_json(std::string_view json_text, std::string_view source);
std::string chain_to_json(const Chain& chain);
Chain read_chain_file(const std::string& path);
void write_chain_file(const std::string& path, const Chain& chain);

// Chain plan JSON, format "remat-chain-plan" v1 (docs/solvers/rotor.md): the ops, solver,
// budget, status, stats and the chain simulator's makespan and peak beside the store-all figures.
std::string chain_plan_to_json(const Chain& chain, const ChainSolveResult& result, Budget budget);
// Reads the ops of a chain plan; throws InputError naming the file and the line:column (syntax)
// or the op (content).
ChainSequence parse_chain_plan_json(std::string_view json_text, std::string_view source);

// Plan JSON: the sequence (ids and names), solver, budget, status, stats, and the simulator's
// peak and cost with the baseline figures beside them.
std::string plan_to_json(const Graph& graph, const SolveResult& result, Budget budget);
void write_plan_file(const std::string& path, const Graph& graph, const SolveResult& result,
                     Budget budget);
// Reads a plan's sequence; each step's name (when present) must match the graph's node id.
Plan parse_plan_json(const Graph& graph, std::string_view json_text, std::string_view source);
Plan read_plan_file(const Graph& graph, const std::string& path);

}  // namespace remat
