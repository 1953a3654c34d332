"""Texts the token-counter benchmark measures: Chinese, English and mixed, as agents see them.

Written for this benchmark in the seeds' domain (policy documents, requirement changes, tool
results); the mixed samples interleave Chinese with identifiers, numbers, JSON and code.
"""

from __future__ import annotations

__all__ = ["SAMPLES"]

_ZH = (
    "根据二零二四年发布的补贴管理办法，申请企业需要在每季度结束后的十五个工作日内提交材料。"
    "与二零二三年版本相比，新办法取消了对注册资本的限制，但增加了社保缴纳人数的要求，"
    "并且明确规定同一项目不得重复申报。如果企业在审核期间变更了法定代表人，应当重新提交授权书。",
    "用户希望系统帮他总结这个项目的所有需求变更。第一次评审时，产品经理提出把订单导出功能改为异步处理，"
    "测试团队反馈旧接口仍被三个下游系统调用，因此决定保留旧接口六个月。第二次评审把验收标准从"
    "“页面可打开”改成“一万条数据在五秒内导出完成”，并要求补充失败重试和权限校验的说明。",
    "代理在执行计划时发现，检索到的两份文件对同一个指标给出了不同的数值：官方公告写的是百分之十二，"
    "内部周报写的是百分之十五。按照证据仲裁的顺序，应先确认用户是否有权限查看内部周报，再比较实体、"
    "版本和时间，最后才看来源的可信度。模型自己的总结永远不能作为最终依据，必须引用原始记录的编号。",
)

_EN = (
    "Under the 2024 subsidy rules, an applicant must file its documents within fifteen working "
    "days after the end of each quarter. Compared with the 2023 version, the new rules drop the "
    "registered-capital threshold but add a minimum headcount covered by social insurance, and "
    "they state plainly that the same project may not be submitted twice.",
    "The agent found two retrieved documents that disagree about the same metric: the official "
    "notice says twelve percent, while the internal weekly report says fifteen. Following the "
    "arbitration order, it first checks whether the user may see the internal report, then "
    "compares entity, version and date, and only then weighs how credible each source is.",
    "A guard that stops a run leaves a usable state: every pending tool call gets an answer, the "
    "user gets the confirmed partial result and a list of what is still missing, and the reason "
    "is recorded so that a replay from any checkpoint reaches the same decision again.",
)

_TECH = (
    'ToolMessage(name="search_policy", tool_call_id="call_7f3a"): [{"id": "doc-17", '
    '"version": 3, "updated_at": "2024-03-01T09:30:00Z", "source_type": "official", '
    '"claim_key": "subsidy.headcount_min", "value": 10}, {"id": "doc-09", "version": 2}]',
    "def fit_context(messages, *, max_tokens, policy=None, pinned=()):\n"
    '    """Fit messages into a window; raises ContextBudgetError when pins exceed it."""\n'
    "    budget = max_tokens - policy.reserve_for(max_tokens)\n"
    "    return decide(policy, assemble(messages, budget, pinned))\n",
    "Error 429 Too Many Requests: rate limit exceeded for model gpt-4o-mini on tokens per "
    "min (TPM): Limit 200000, Used 199120, Requested 1840. Retry-After: 2s. See "
    "https://example.com/docs/guides/rate-limits for details (request id req_8c1e22).",
)

_MIXED = (
    "调用 search_policy(query='subsidy 2024', top_k=5) 返回了 5 条结果，其中 doc-17 的 "
    "version=3、updated_at=2024-03-01，doc-09 的 version=2。请比较 doc-17 和 doc-09 的 "
    "eligibility 字段，并说明 headcount >= 10 这一条件是从哪个版本开始生效的。",
    '{"id": "REQ-204", "title": "订单导出改为异步", "status": "approved", "owner": "张伟", '
    '"acceptance": "10,000 rows exported in < 5 s", "notes": "旧接口 /api/v1/export 保留 6 个月"}',
    "The loop guard flagged 3 identical calls to get_weather(city='北京') within one turn; "
    "上一次结果仍然有效，所以第二次和第三次直接复用了缓存，没有再调用工具。Reason code: "
    "repeat_read_reused, policy LoopPolicy@1, step 42.",
)

SAMPLES: dict[str, tuple[str, ...]] = {
    "chinese": _ZH,
    "english, prose": _EN,
    "english, technical": _TECH,
    "mixed": _MIXED,
}
"""Sample texts by language; each is counted as one message."""
