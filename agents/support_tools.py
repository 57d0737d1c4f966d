"""Tools of the example support agent (``support.agent.yaml``).

Plain typed functions: the agent file maps their parameters to the model's
arguments (``tool_args.<field>``) or to the agent's context (``ctx.<name>``).
"""

from __future__ import annotations

ARTICLES = {
    "en": {
        "locked": "Accounts lock after 5 failed sign-ins. Reset the password from the sign-in page "
        "or wait 30 minutes.",
        "invoice": "Invoices are under Billing > History; each can be downloaded as PDF.",
        "password": "Use 'Forgot password' on the sign-in page; the link is valid for one hour.",
    },
    "de": {
        "locked": "Konten werden nach 5 Fehlversuchen gesperrt. Passwort zuruecksetzen oder "
        "30 Minuten warten.",
    },
}

ESCALATIONS: list[dict[str, str]] = []


def search_knowledge_base(query: str, locale: str = "en", limit: int = 3) -> list[str]:
    """Search the support knowledge base.

    Args:
        query: what the customer asks about, in a few words
        locale: language of the articles
        limit: maximum number of articles
    """
    articles = ARTICLES.get(locale) or ARTICLES["en"]
    words = {word.strip(".,?!").lower() for word in query.split()}
    hits = [text for topic, text in articles.items() if topic in words or topic in query.lower()]
    return hits[:limit] or ["No article matches; consider escalating to a human."]


def escalate_to_human(reason: str, customer_id: str) -> str:
    """Hand the conversation to a human support agent.

    Args:
        reason: why a human is needed
        customer_id: the customer this is about
    """
    ticket = f"T-{len(ESCALATIONS) + 1:04d}"
    ESCALATIONS.append({"ticket": ticket, "reason": reason, "customer": customer_id})
    return f"escalated as ticket {ticket}"
